#include "launch/store_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace hp::launch {

StoreDir::StoreDir(bool wanted) {
  if (!wanted) return;
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/hyperpipe-store-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create the job's private store directory " + pattern + ": " +
                             std::strerror(errno) + " (set TMPDIR to a writable directory)");
  }
  dir_ = pattern;
}

StoreDir::~StoreDir() {
  if (dir_.empty()) return;
  std::error_code ignored;  // nothing to do about a failure at the job's end
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace hp::launch
