#include "launch/start_dir.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace hp::launch {

StartDir::StartDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/hyperpipe-store-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot create the job's private store directory " + pattern + ": " +
                             std::strerror(errno) + " (set TMPDIR to a writable directory)");
  }
  dir_ = pattern;
}

StartDir::~StartDir() {
  std::error_code ignored;  // nothing to do about a failure at the start's end
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace hp::launch
