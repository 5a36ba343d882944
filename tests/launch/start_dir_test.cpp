#include "launch/start_dir.hpp"

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace hp::launch {
namespace {

namespace fs = std::filesystem;

// The pid of a process that has exited and been reaped.
pid_t a_gone_pid() {
  pid_t pid = 0;
  char* argv[] = {const_cast<char*>("true"), nullptr};
  EXPECT_EQ(::posix_spawnp(&pid, "true", nullptr, nullptr, argv, environ), 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

fs::path a_rings_dir(const fs::path& parent, const std::string& name, pid_t launcher) {
  const fs::path dir = parent / ("hyperpipe-shm-" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "launcher.pid") << launcher << "\n";
  std::ofstream(dir / "job.0-1") << "ring";
  return dir;
}

TEST(StartDir, TheRingsDirectoryGoesWithTheStartAndTakesTheOrphansOfLaunchersThatAreGone) {
  fs::path orphan, live;
  std::string rings;
  {
    StartDir dir;
    const fs::path store_dir = fs::path(dir.store_path()).parent_path();
    const bool in_memory = fs::exists("/dev/shm") && fs::space("/dev/shm").available >= (1ull << 30);
    if (in_memory) {
      orphan = a_rings_dir("/dev/shm", "test-orphan-" + std::to_string(::getpid()), a_gone_pid());
      live = a_rings_dir("/dev/shm", "test-live-" + std::to_string(::getpid()), ::getpid());
    }
    rings = dir.shm_dir();
    EXPECT_EQ(dir.shm_dir(), rings);  // made once
    EXPECT_TRUE(fs::is_directory(rings));
    EXPECT_EQ(fs::status(rings).permissions() & fs::perms::all, fs::perms::owner_all);
    std::ifstream owner(rings + "/launcher.pid");
    pid_t pid = 0;
    owner >> pid;
    EXPECT_EQ(pid, ::getpid());
    if (in_memory) {
      EXPECT_EQ(fs::path(rings).parent_path(), "/dev/shm");
      EXPECT_FALSE(fs::exists(orphan)) << "the rings of a launcher that is gone stay";
      EXPECT_TRUE(fs::exists(live)) << "the rings of a running launcher were removed";
      fs::remove_all(live);
    } else {
      EXPECT_EQ(fs::path(rings).parent_path(), store_dir);
    }
  }
  EXPECT_FALSE(fs::exists(rings));
}

}  // namespace
}  // namespace hp::launch
