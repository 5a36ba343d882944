#include "train/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "train/checkpoint.hpp"
#include "train/checkpoint_error.hpp"

namespace hp::train {
namespace {

namespace fs = std::filesystem;

WriteFault& write_fault() {
  static WriteFault fault;
  return fault;
}

// Creates or truncates path and writes data, then fsyncs it. Our own write loop (rather than an
// ofstream or the archive's writer) so that a failure can say which file, how many of its bytes
// were written and the errno; the partial file is removed before the error is thrown.
void write_file(const fs::path& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(cat("cannot create ", path.string(), ": ", std::strerror(errno)));
  std::size_t done = 0;
  auto fail = [&](int err, const char* doing) {
    ::close(fd);
    ::unlink(path.c_str());
    throw std::runtime_error(cat("cannot ", doing, " ", path.string(), " (", done, " of ", data.size(),
                                 " bytes written): ", std::strerror(err)));
  };
  while (done < data.size()) {
    const std::size_t chunk = std::min<std::size_t>(data.size() - done, std::size_t(1) << 16);
    if (write_fault())
      if (const int err = write_fault()(path.string(), done, data.size())) fail(err, "write");
    const ssize_t n = ::write(fd, data.data() + done, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno, "write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail(errno, "sync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    throw std::runtime_error(cat("cannot close ", path.string(), ": ", std::strerror(err)));
  }
}

void rename_path(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw std::runtime_error(cat("cannot rename ", from.string(), " to ", to.string(), ": ", ec.message()));
}

}  // namespace

void set_checkpoint_write_fault(WriteFault fault) { write_fault() = std::move(fault); }

void fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), O_RDONLY | (directory ? O_DIRECTORY : 0));
  if (fd < 0) throw std::runtime_error(cat("cannot open ", p.string(), " to sync it: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error(cat("fsync of ", p.string(), " failed: ", std::strerror(err)));
}

fs::path tmp_sibling(const fs::path& p) {
  fs::path t = p;
  t += ".tmp";
  return t;
}

void write_text_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = tmp_sibling(path);
  write_file(tmp, text);
  try {
    rename_path(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(cat("cannot read ", path.string()));
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::uint32_t crc32_of(const std::string& data) {
  // zlib's crc32_z takes a size_t length (crc32 only a uInt).
  return static_cast<std::uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data.data()), data.size()));
}

std::string crc_hex(std::uint32_t crc) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", crc);
  return buf;
}

}  // namespace hp::train
