#include "data/sentencepiece_wire.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace hp::data::wire {

bool write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == ENOTSOCK) k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool write_u8(int fd, std::uint8_t v) { return write_all(fd, &v, 1); }
bool read_u8(int fd, std::uint8_t& v) { return read_all(fd, &v, 1); }

bool write_bytes(int fd, const std::string& s) {
  const std::uint64_t n = s.size();
  return write_all(fd, &n, sizeof n) && write_all(fd, s.data(), s.size());
}

bool read_bytes(int fd, std::string& s) {
  std::uint64_t n = 0;
  if (!read_all(fd, &n, sizeof n)) return false;
  s.resize(n);
  return read_all(fd, s.data(), n);
}

bool write_ids(int fd, const std::vector<int>& ids) {
  const std::uint64_t n = ids.size();
  return write_all(fd, &n, sizeof n) && write_all(fd, ids.data(), ids.size() * sizeof(int));
}

bool read_ids(int fd, std::vector<int>& ids) {
  std::uint64_t n = 0;
  if (!read_all(fd, &n, sizeof n)) return false;
  ids.resize(n);
  return read_all(fd, ids.data(), n * sizeof(int));
}

}  // namespace hp::data::wire
