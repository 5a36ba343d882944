#include "launch/store_server.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include "launch/store_wire.hpp"

namespace hp::launch {

namespace wire = store_wire;
using Clock = std::chrono::steady_clock;

namespace {

std::optional<long long> parse_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  std::size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size() || s.size() > 19) return std::nullopt;
  for (std::size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return std::nullopt;
  return std::stoll(s);
}

}  // namespace

struct StoreServer::State {
  struct Wait {
    std::vector<std::string> keys;
    Clock::time_point deadline;
  };
  struct Conn {
    int fd = -1;
    std::string in, out;
    std::map<std::string, std::string> wills;
    std::optional<Wait> waiting;
    bool closed = false;
  };

  std::map<std::string, std::string> kv;
  std::list<Conn> conns;

  bool all_exist(const std::vector<std::string>& keys) const {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return kv.count(k) != 0; });
  }

  static void reply(Conn& c, std::uint8_t status, const std::vector<std::string>& parts = {}) {
    c.out += wire::encode(status, parts);
  }

  // Answers one request; a wait whose keys are missing stays pending.
  void handle(Conn& c, const wire::Frame& f) {
    const auto& p = f.parts;
    auto need = [&](std::size_t n) { return p.size() >= n; };
    switch (f.code) {
      case wire::kSet:
        if (!need(2)) break;
        kv[p[0]] = p[1];
        return reply(c, wire::kOk);
      case wire::kGet: {
        if (!need(1)) break;
        auto it = kv.find(p[0]);
        return it == kv.end() ? reply(c, wire::kMissing) : reply(c, wire::kOk, {it->second});
      }
      case wire::kAdd: {
        if (!need(2)) break;
        const auto delta = parse_number(p[1]);
        auto it = kv.find(p[0]);
        const auto now = it == kv.end() ? std::optional<long long>(0) : parse_number(it->second);
        if (!delta || !now) return reply(c, wire::kError, {"add: the value of '" + p[0] + "' is not a number"});
        const std::string v = std::to_string(*now + *delta);
        kv[p[0]] = v;
        return reply(c, wire::kOk, {v});
      }
      case wire::kCompareSet: {
        if (!need(3)) break;
        auto it = kv.find(p[0]);
        if (it == kv.end()) {
          if (!p[1].empty()) return reply(c, wire::kOk, {p[1]});
          kv[p[0]] = p[2];
          return reply(c, wire::kOk, {p[2]});
        }
        if (it->second == p[1]) it->second = p[2];
        return reply(c, wire::kOk, {it->second});
      }
      case wire::kDelete:
        if (!need(1)) break;
        return reply(c, wire::kOk, {kv.erase(p[0]) != 0 ? "1" : "0"});
      case wire::kCheck:
        return reply(c, wire::kOk, {all_exist(p) ? "1" : "0"});
      case wire::kNumKeys:
        return reply(c, wire::kOk, {std::to_string(kv.size())});
      case wire::kWait: {
        if (!need(1)) break;
        const auto ms = parse_number(p[0]);
        if (!ms || *ms <= 0) return reply(c, wire::kError, {"wait: the timeout must be a positive number of ms"});
        Wait w{std::vector<std::string>(p.begin() + 1, p.end()), Clock::now() + std::chrono::milliseconds(*ms)};
        if (all_exist(w.keys)) return reply(c, wire::kOk);
        c.waiting = std::move(w);
        return;
      }
      case wire::kWill:
        if (!need(2)) break;
        c.wills[p[0]] = p[1];
        return reply(c, wire::kOk);
      case wire::kBye:
        c.wills.clear();
        return reply(c, wire::kOk);
      default:
        return reply(c, wire::kError, {"unknown request " + std::to_string(f.code)});
    }
    reply(c, wire::kError, {"request " + std::to_string(f.code) + " with too few parts"});
  }

  // Answers the waits that are now met or past their deadline; true when any was.
  bool settle_waits(Clock::time_point now) {
    bool any = false;
    for (Conn& c : conns) {
      if (!c.waiting) continue;
      if (all_exist(c.waiting->keys)) {
        reply(c, wire::kOk);
      } else if (now >= c.waiting->deadline) {
        reply(c, wire::kTimeout);
      } else {
        continue;
      }
      c.waiting.reset();
      any = true;
    }
    return any;
  }

  // Parses and answers what `c` sent, up to a pending wait.
  void process(Conn& c) {
    while (!c.waiting && !c.closed) {
      wire::Frame f;
      std::size_t used;
      try {
        used = wire::decode(c.in, f);
      } catch (const std::exception&) {
        c.closed = true;  // not our protocol: drop it (its wills fire)
        return;
      }
      if (used == 0) return;
      c.in.erase(0, used);
      handle(c, f);
    }
  }

  void flush(Conn& c) {
    while (!c.out.empty() && !c.closed) {
      const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        c.closed = true;
      }
    }
  }

  // A lost connection's wills take effect.
  void drop(Conn& c) {
    for (const auto& [k, v] : c.wills) kv.emplace(k, v);
    ::close(c.fd);
  }
};

StoreServer::StoreServer(const std::string& addr, int port) : state_(std::make_unique<State>()) {
  const std::string where = addr + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) throw std::runtime_error("the store cannot resolve " + addr + ": " + ::gai_strerror(gai));
  std::string why = "no address";
  for (addrinfo* a = res; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 256) == 0) {
      listen_fd_ = fd;
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      port_ = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                            : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) throw std::runtime_error("the store cannot listen on " + where + ": " + why);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error(std::string("the store's pipe2 failed: ") + std::strerror(errno));
  }
  // The thread starts with every signal blocked: they stay the launcher thread's.
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &saved);
  thread_ = std::thread([this] { serve(); });
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

StoreServer::~StoreServer() {
  const char c = 0;
  [[maybe_unused]] ssize_t n = ::write(wake_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  for (State::Conn& conn : state_->conns) ::close(conn.fd);
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void StoreServer::serve() {
  using Conn = State::Conn;
  State& s = *state_;
  std::vector<pollfd> fds;
  std::vector<Conn*> owners;
  while (true) {
    fds.assign({pollfd{wake_[0], POLLIN, 0}, pollfd{listen_fd_, POLLIN, 0}});
    owners.assign(2, nullptr);
    Clock::time_point next = Clock::now() + std::chrono::seconds(1);
    for (Conn& c : s.conns) {
      fds.push_back(pollfd{c.fd, static_cast<short>((c.waiting ? 0 : POLLIN) | (c.out.empty() ? 0 : POLLOUT)), 0});
      owners.push_back(&c);
      if (c.waiting) next = std::min(next, c.waiting->deadline);
    }
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(0, wait_ms) + 1));
    if (n < 0 && errno != EINTR) return;
    if (n > 0 && fds[0].revents != 0) return;
    if (n > 0 && (fds[1].revents & POLLIN) != 0) {
      while (true) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s.conns.emplace_back().fd = fd;
        ++connections_;
      }
    }
    for (std::size_t i = 2; n > 0 && i < fds.size(); ++i) {
      Conn& c = *owners[i];
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !c.waiting) {
        char buf[65536];
        while (true) {
          const ssize_t got = ::recv(c.fd, buf, sizeof(buf), 0);
          if (got > 0) {
            c.in.append(buf, static_cast<std::size_t>(got));
            continue;
          }
          if (got < 0 && errno == EINTR) continue;
          if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c.closed = true;
          break;
        }
      }
    }
    // Lost connections first (a request that arrived with a loss sees its
    // wills), then the requests, then the waits they or the wills met.
    while (true) {
      for (Conn& c : s.conns) {
        if (c.closed) s.drop(c), c.fd = -1;
      }
      const auto before = s.conns.size();
      s.conns.remove_if([](const Conn& c) { return c.fd < 0; });
      connections_ -= static_cast<int>(before - s.conns.size());
      for (Conn& c : s.conns) s.process(c);  // after a met wait, that connection goes on
      if (!s.settle_waits(Clock::now())) break;
    }
    for (Conn& c : s.conns) s.flush(c);
  }
}

}  // namespace hp::launch
