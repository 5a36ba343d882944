#include "comm/rendezvous.hpp"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "comm/comm_error.hpp"
#include "comm/error_text.hpp"
#include "comm/launcher_store.hpp"

namespace hp::comm {

using Ms = std::chrono::milliseconds;

namespace {

// What a rank that cannot reach rank 0's store should check.
const char* const kCheckRankZero = " (is rank 0 running, with the same MASTER_ADDR and MASTER_PORT?)";

// Waits until something accepts TCP connections at host:port, or the
// deadline passes. LibTorch 1.13's TCPStore client gives up at once when the
// server is not listening yet, so clients probe first (a bare connect that the
// store server sees as a client coming and going). Returns the last error.
std::string wait_for_listener(const std::string& host, int port, std::chrono::steady_clock::time_point deadline) {
  std::string last = "not tried";
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last = std::string("cannot resolve ") + host + ": " + gai_strerror(gai);
    } else {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
        int err = rc == 0 ? 0 : errno;
        ::close(fd);
        if (rc == 0) {
          freeaddrinfo(res);
          return {};
        }
        last = std::strerror(err);
      }
      freeaddrinfo(res);
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return last;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(Ms(100), deadline - now));
  }
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

// numWorkers -1: no FileStore removes the file when destroyed (each rank
// holds several, so a count would reach the world size early); the launcher
// that made the file removes its directory.
c10::intrusive_ptr<c10d::Store> open_file_store(const std::string& path, Ms timeout) {
  auto store = c10::make_intrusive<c10d::FileStore>(path, -1);
  store->setTimeout(timeout);
  return store;
}

}  // namespace

c10::intrusive_ptr<c10d::Store> connect_to_store(const DistEnv& env, int port, Ms timeout) {
  if (!env.store_path.empty()) return open_file_store(env.store_path, timeout);
  if (env.launcher_store)
    return c10::make_intrusive<LauncherStore>(env.master_addr, env.master_port, env.launcher_store_prefix, timeout);
  if (port == 0) throw std::invalid_argument("connect_to_store: a single process's store is in its memory only");
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(port);
  so.isServer = false;
  so.waitWorkers = false;
  so.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
}

// A UDP connect() sends nothing; it only selects the route, whose local end
// getsockname() then reads.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port == 0 ? 9 : port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || res == nullptr) return {};
  // Prefer IPv4, as the store and most clusters do.
  addrinfo* pick = res;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  std::string out;
  int fd = ::socket(pick->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    if (::connect(fd, pick->ai_addr, pick->ai_addrlen) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        char buf[INET6_ADDRSTRLEN] = {0};
        const void* src = ss.ss_family == AF_INET
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
        if (inet_ntop(ss.ss_family, src, buf, sizeof(buf)) != nullptr) out = buf;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return out;
}

Rendezvous::Rendezvous(const DistEnv& env, const ProcessGroupOptions& options)
    : env_(env),
      timeout_(options.timeout),
      who_("rank " + std::to_string(env.rank) + ": "),
      where_(env.store_path.empty() ? env.master_addr + ":" + std::to_string(env.master_port) +
                                          (env.launcher_store ? " (node 0's launcher)" : "")
                                    : "file " + env.store_path),
      same_(env.store_path.empty() ? "MASTER_ADDR and MASTER_PORT" : "HYPERPIPE_STORE_PATH"),
      limit_(format_duration(options.timeout)) {
  connect_store();
  group_store_ = c10::make_intrusive<c10d::PrefixStore>("hyperpipe/" + options.group_name, store_);
  try {
    group_store_->set("joined/" + std::to_string(env.rank), bytes_of("1"));
  } catch (const std::exception& e) {
    fail("announcing this rank on the store at " + where_ + " failed", clean_message(e));
  }
  wait_for_all("joined/", "join");
}

void Rendezvous::connect_store() {
  if (!env_.store_path.empty()) {
    store_ = open_file_store(env_.store_path, timeout_);
    return;
  }
  if (env_.launcher_store) {
    try {
      store_ = connect_to_store(env_, env_.master_port, timeout_);
    } catch (const std::exception& e) {
      fail("connecting to the store at " + where_ + " failed", clean_message(e));
    }
    port_ = env_.master_port;
    return;
  }
  if (env_.world_size == 1) {
    store_ = c10::make_intrusive<c10d::HashStore>();
    store_->setTimeout(timeout_);
    return;
  }
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(env_.master_port);
  so.isServer = env_.rank == 0;
  so.waitWorkers = false;
  so.timeout = timeout_;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  if (env_.rank != 0) {
    std::string why = wait_for_listener(env_.master_addr, env_.master_port, deadline);
    if (!why.empty()) {
      throw CommError(who_ + "connecting to the TCPStore at " + where_ + " (hosted by rank 0) failed within " +
                          limit_ + ": " + why + kCheckRankZero,
                      env_.rank, 0, "rendezvous", -1, true);
    }
    so.timeout = std::max(Ms(1000), std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now()));
  }
  c10::intrusive_ptr<c10d::TCPStore> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
  } catch (const std::exception& e) {
    if (env_.rank == 0) {
      fail("hosting the TCPStore at " + where_ + " failed", clean_message(e) + " (is MASTER_PORT already in use?)");
    }
    fail("connecting to the TCPStore at " + where_ + " (hosted by rank 0) failed", clean_message(e) + kCheckRankZero);
  }
  // Later store waits use the full timeout again.
  tcp->setTimeout(timeout_);
  port_ = tcp->getPort();
  store_ = tcp;
}

void Rendezvous::finish() {
  try {
    group_store_->set("connected/" + std::to_string(env_.rank), bytes_of("1"));
  } catch (const std::exception& e) {
    fail("reporting the connection on the store at " + where_ + " failed", clean_message(e));
  }
  if (env_.rank == 0) wait_for_all("connected/", "finish connecting");
}

void Rendezvous::fail(const std::string& action, const std::string& message) const {
  throw CommError(who_ + action + ": " + message, env_.rank, -1, "rendezvous", -1, looks_like_timeout(message));
}

void Rendezvous::wait_for_all(const std::string& key_prefix, const std::string& what) {
  const int world = env_.world_size;
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(key_prefix + std::to_string(r));
  try {
    group_store_->wait(keys, timeout_);
  } catch (const std::exception& e) {
    std::vector<int> missing;
    try {
      for (int r = 0; r < world; ++r) {
        if (!group_store_->check({keys[r]})) missing.push_back(r);
      }
    } catch (const std::exception&) {
    }
    std::ostringstream os;
    if (!missing.empty()) {
      os << (missing.size() == 1 ? "rank " : "ranks ");
      for (std::size_t i = 0; i < missing.size(); ++i) os << (i ? ", " : "") << missing[i];
      os << " of " << world << " did not " << what << " within " << limit_
         << (missing.size() == 1 ? " (is it running" : " (are they running")
         << ", with the same " << same_ << "?)";
    } else {
      os << "waiting for all ranks to " << what << " failed: " << clean_message(e);
    }
    throw CommError(who_ + "rendezvous at " + where_ + ": " + os.str(), env_.rank, missing.empty() ? -1 : missing[0],
                    "rendezvous", -1, !missing.empty() || looks_like_timeout(clean_message(e)));
  }
}

}  // namespace hp::comm
