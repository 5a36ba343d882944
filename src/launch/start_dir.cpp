#include "launch/start_dir.hpp"

#include <linux/magic.h>
#include <signal.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace hp::launch {

namespace {

std::string make_private_dir(std::string pattern, const std::string& what) {
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create " + what + " " + pattern + ": " + std::strerror(errno) +
                             " (set TMPDIR to a writable directory)");
  return pattern;
}

constexpr const char* kShmPrefix = "hyperpipe-shm-";
constexpr const char* kOwnerFile = "/launcher.pid";

// A launcher killed with -9 leaves its rings in memory: the next one on the
// host removes the directories whose launcher is gone.
void remove_orphans(const std::string& parent) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    if (entry.path().filename().string().rfind(kShmPrefix, 0) != 0) continue;
    pid_t owner = 0;
    std::ifstream(entry.path().string() + kOwnerFile) >> owner;
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
  }
}

}  // namespace

StartDir::StartDir() {
  const char* tmp = std::getenv("TMPDIR");
  dir_ = make_private_dir(std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/hyperpipe-store-XXXXXX",
                          "the job's private store directory");
}

std::string StartDir::shm_dir() {
  if (shm_dir_.empty()) {
    // A container's /dev/shm may hold 64 MiB: rings of 1 MiB per pair of ranks would fill it.
    constexpr unsigned long long kEnough = 1ull << 30;
    struct statfs fs {};
    const bool memory = ::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC && ::access("/dev/shm", W_OK) == 0 &&
                        static_cast<unsigned long long>(fs.f_bavail) * fs.f_bsize >= kEnough;
    const std::string parent = memory ? "/dev/shm" : dir_;
    if (memory) remove_orphans(parent);
    shm_dir_ = make_private_dir(parent + "/" + kShmPrefix + "XXXXXX", "the ranks' shared-memory directory");
    std::ofstream(shm_dir_ + kOwnerFile) << ::getpid() << "\n";
  }
  return shm_dir_;
}

StartDir::~StartDir() {
  std::error_code ignored;  // nothing to do about a failure at the start's end
  if (!shm_dir_.empty()) std::filesystem::remove_all(shm_dir_, ignored);
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace hp::launch
