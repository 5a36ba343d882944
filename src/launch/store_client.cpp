#include "launch/store_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "launch/store_wire.hpp"

namespace hp::launch {

namespace wire = store_wire;
using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

namespace {

// One connect attempt to every address of host:port; the fd, or -1 and why.
int try_connect(const std::string& host, int port, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) {
    why = "cannot resolve " + host + ": " + ::gai_strerror(gai);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd >= 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace

StoreClient::StoreClient(std::string host, int port, Ms connect_timeout, Ms op_timeout)
    : where_(host + ":" + std::to_string(port)), op_timeout_(op_timeout) {
  const auto deadline = Clock::now() + connect_timeout;
  std::string why = "not tried";
  while ((fd_ = try_connect(host, port, why)) < 0) {
    if (Clock::now() >= deadline)
      throw StoreError("no store answered at " + where_ + " within " + std::to_string(connect_timeout.count()) +
                           " ms: " + why,
                       true);
    std::this_thread::sleep_for(Ms(50));
  }
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void StoreClient::fail(const std::string& what, bool timed_out) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  throw StoreError("the store at " + where_ + ": " + what, timed_out);
}

std::vector<std::string> StoreClient::call(std::uint8_t op, const std::vector<std::string>& parts,
                                           std::uint8_t* status, Ms reply_within) {
  if (fd_ < 0) throw StoreError("the store at " + where_ + ": the connection was lost before", false);
  const std::string frame = wire::encode(op, parts);
  for (std::size_t sent = 0; sent < frame.size();) {
    const ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(std::string("sending failed: ") + std::strerror(errno) + " (is node 0's launcher gone?)", false);
    sent += static_cast<std::size_t>(n);
  }
  const auto deadline = Clock::now() + reply_within;
  while (true) {
    wire::Frame reply;
    std::size_t used = 0;
    try {
      used = wire::decode(in_, reply);
    } catch (const std::exception& e) {
      fail(e.what(), false);
    }
    if (used > 0) {
      in_.erase(0, used);
      *status = reply.code;
      return std::move(reply.parts);
    }
    const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
    if (left <= 0) fail("no reply within " + std::to_string(reply_within.count()) + " ms (timeout)", true);
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[65536];
    const ssize_t got = ::recv(fd_, buf, sizeof(buf), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail("the connection was closed (is node 0's launcher gone?)", false);
    in_.append(buf, static_cast<std::size_t>(got));
  }
}

std::string StoreClient::ok_value(std::uint8_t op, const std::vector<std::string>& parts) {
  std::uint8_t status = 0;
  auto reply = call(op, parts, &status, op_timeout_);
  if (status != wire::kOk) fail(reply.empty() ? "request refused" : reply[0], false);
  return reply.empty() ? std::string() : reply[0];
}

void StoreClient::set(const std::string& key, const std::string& value) { ok_value(wire::kSet, {key, value}); }

std::optional<std::string> StoreClient::get(const std::string& key) {
  std::uint8_t status = 0;
  auto reply = call(wire::kGet, {key}, &status, op_timeout_);
  if (status == wire::kMissing) return std::nullopt;
  if (status != wire::kOk || reply.empty()) fail("get refused", false);
  return reply[0];
}

std::int64_t StoreClient::add(const std::string& key, std::int64_t delta) {
  return std::stoll(ok_value(wire::kAdd, {key, std::to_string(delta)}));
}

std::string StoreClient::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  return ok_value(wire::kCompareSet, {key, expected, desired});
}

bool StoreClient::remove(const std::string& key) { return ok_value(wire::kDelete, {key}) == "1"; }

bool StoreClient::check(const std::vector<std::string>& keys) { return ok_value(wire::kCheck, keys) == "1"; }

std::int64_t StoreClient::num_keys() { return std::stoll(ok_value(wire::kNumKeys, {})); }

bool StoreClient::wait(const std::vector<std::string>& keys, Ms timeout) {
  std::vector<std::string> parts{std::to_string(std::max<long long>(1, timeout.count()))};
  parts.insert(parts.end(), keys.begin(), keys.end());
  std::uint8_t status = 0;
  auto reply = call(wire::kWait, parts, &status, timeout + op_timeout_);
  if (status == wire::kTimeout) return false;
  if (status != wire::kOk) fail(reply.empty() ? "wait refused" : reply[0], false);
  return true;
}

void StoreClient::will(const std::string& key, const std::string& value) { ok_value(wire::kWill, {key, value}); }

void StoreClient::goodbye() {
  if (fd_ < 0) return;
  try {
    ok_value(wire::kBye, {});
  } catch (const StoreError&) {
  }
}

}  // namespace hp::launch
