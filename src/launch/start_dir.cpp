#include "launch/start_dir.hpp"

#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace hp::launch {

namespace {

std::string make_private_dir(std::string pattern, const std::string& what) {
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create " + what + " " + pattern + ": " + std::strerror(errno) +
                             " (set TMPDIR to a writable directory)");
  return pattern;
}

}  // namespace

StartDir::StartDir() {
  const char* tmp = std::getenv("TMPDIR");
  dir_ = make_private_dir(std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/hyperpipe-store-XXXXXX",
                          "the job's private store directory");
}

std::string StartDir::shm_dir() {
  if (shm_dir_.empty()) {
    struct statfs fs {};
    const bool memory = ::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC && ::access("/dev/shm", W_OK) == 0;
    shm_dir_ = memory ? make_private_dir("/dev/shm/hyperpipe-shm-XXXXXX", "the ranks' shared-memory directory")
                      : make_private_dir(dir_ + "/shm-XXXXXX", "the ranks' shared-memory directory");
  }
  return shm_dir_;
}

StartDir::~StartDir() {
  std::error_code ignored;  // nothing to do about a failure at the start's end
  if (!shm_dir_.empty()) std::filesystem::remove_all(shm_dir_, ignored);
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace hp::launch
