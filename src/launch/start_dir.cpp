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
#include <utility>

namespace hp::launch {

namespace {

std::string make_private_dir(std::string pattern, const std::string& what) {
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create " + what + " " + pattern + ": " + std::strerror(errno) +
                             " (set TMPDIR to a writable directory)");
  return pattern;
}

constexpr const char* kStorePrefix = "hyperpipe-store-";
constexpr const char* kShmPrefix = "hyperpipe-shm-";
constexpr const char* kOwnerFile = "/launcher.pid";

// A launcher killed with -9 leaves its directories behind: the next one on
// the host removes those under `parent` whose launcher is gone. A directory
// without a pid yet (being made) or of a live process (or another user's:
// kill says EPERM) stays.
void remove_orphans(const std::string& parent, const char* prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
    pid_t owner = 0;
    std::ifstream(entry.path().string() + kOwnerFile) >> owner;
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
  }
}

// A private directory under `parent` holding this launcher's pid, after the
// orphans beside it are gone.
std::string make_owned_dir(const std::string& parent, const char* prefix, const std::string& what) {
  remove_orphans(parent, prefix);
  const std::string dir = make_private_dir(parent + "/" + prefix + "XXXXXX", what);
  std::ofstream(dir + kOwnerFile) << ::getpid() << "\n";
  return dir;
}

}  // namespace

StartDir::StartDir(StartDirPlaces places) : places_(std::move(places)) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent =
      !places_.tmp.empty() ? places_.tmp : tmp != nullptr && *tmp != '\0' ? std::string(tmp) : std::string("/tmp");
  dir_ = make_owned_dir(parent, kStorePrefix, "the job's private store directory");
}

std::string StartDir::shm_dir() {
  if (shm_dir_.empty()) {
    const char* shm = places_.shm.c_str();
    struct statfs fs {};
    const bool memory = ::statfs(shm, &fs) == 0 && fs.f_type == TMPFS_MAGIC && ::access(shm, W_OK) == 0 &&
                        static_cast<unsigned long long>(fs.f_bavail) * fs.f_bsize >= places_.shm_free_needed;
    shm_dir_ = make_owned_dir(memory ? places_.shm : dir_, kShmPrefix, "the ranks' shared-memory directory");
  }
  return shm_dir_;
}

StartDir::~StartDir() {
  std::error_code ignored;  // nothing to do about a failure at the start's end
  if (!shm_dir_.empty()) std::filesystem::remove_all(shm_dir_, ignored);
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace hp::launch
