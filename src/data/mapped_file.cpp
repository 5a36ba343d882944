#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace hp::data {

MappedFile::MappedFile(const std::string& path, const std::string& what) {
  auto fail = [&](const std::string& why) { throw std::invalid_argument("data.data " + path + ": " + why); };
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open the " + what + " (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("not a regular file");
  }
  bytes_ = static_cast<std::size_t>(st.st_size);
  if (bytes_ > 0) {
    base_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base_ == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      base_ = nullptr;
      fail(std::string("mmap failed (") + std::strerror(e) + ")");
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (base_) ::munmap(base_, bytes_);
}

}  // namespace hp::data
