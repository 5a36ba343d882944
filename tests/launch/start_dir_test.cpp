#include "launch/start_dir.hpp"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>
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

// A directory a launcher made under `parent` ("hyperpipe-store-..." or
// "hyperpipe-shm-..."), owned by `launcher`.
fs::path a_launchers_dir(const fs::path& parent, const std::string& name, pid_t launcher) {
  const fs::path dir = parent / name;
  fs::create_directories(dir);
  std::ofstream(dir / "launcher.pid") << launcher << "\n";
  std::ofstream(dir / "store") << "keys";
  return dir;
}

pid_t owner_of(const fs::path& dir) {
  pid_t pid = 0;
  std::ifstream(dir / "launcher.pid") >> pid;
  return pid;
}

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("hp_start_dir_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The store directory under TMPDIR: private, owned, gone with the start; the
// store directories of launchers that are gone (killed with -9) go when the
// next start is made, those of running launchers stay.
TEST(StartDir, TheStoreDirectoryGoesWithTheStartAndTakesTheOrphansOfLaunchersThatAreGone) {
  const fs::path tmp = fresh("tmp");
  const fs::path orphan = a_launchers_dir(tmp, "hyperpipe-store-orphan", a_gone_pid());
  const fs::path live = a_launchers_dir(tmp, "hyperpipe-store-live", ::getpid());
  const fs::path being_made = tmp / "hyperpipe-store-nopid";  // mkdtemp'd, its pid not written yet
  fs::create_directories(being_made);
  const fs::path other = a_launchers_dir(tmp, "not-hyperpipe", a_gone_pid());
  fs::path store_dir;
  {
    StartDirPlaces places;
    places.tmp = tmp.string();
    StartDir dir(places);
    store_dir = fs::path(dir.store_path()).parent_path();
    EXPECT_EQ(store_dir.parent_path(), tmp);
    EXPECT_EQ(store_dir.filename().string().rfind("hyperpipe-store-", 0), 0u) << store_dir;
    EXPECT_EQ(fs::status(store_dir).permissions() & fs::perms::all, fs::perms::owner_all);
    EXPECT_EQ(owner_of(store_dir), ::getpid());
    EXPECT_FALSE(fs::exists(orphan)) << "the store directory of a launcher that is gone stays";
    EXPECT_TRUE(fs::exists(live)) << "the store directory of a running launcher was removed";
    EXPECT_TRUE(fs::exists(being_made)) << "a directory whose launcher has not written its pid yet was removed";
    EXPECT_TRUE(fs::exists(other));
  }
  EXPECT_FALSE(fs::exists(store_dir));
  fs::remove_all(tmp);
}

// The rings go in the memory file system when it has the room asked for, else
// inside the store directory; in either place they sweep the orphans beside
// them and go with the start. Both places are exercised on every machine: the
// room asked for is none, then more than any machine has.
TEST(StartDir, TheRingsDirectoryGoesWhereThereIsRoomWithTheStartAndTakesTheOrphans) {
  // Where /dev/shm is no writable memory file system (none of the machines
  // here), the rings go in the store directory either way.
  struct statfs fs_info {};
  const bool memory =
      ::statfs("/dev/shm", &fs_info) == 0 && fs_info.f_type == TMPFS_MAGIC && ::access("/dev/shm", W_OK) == 0;
  for (const bool room : {true, false}) {
    StartDirPlaces places;
    places.tmp = fresh("rings").string();
    places.shm_free_needed = room ? 0 : ~0ull;
    const std::string tag = std::to_string(::getpid()) + (room ? "-room" : "-none");
    const fs::path orphan = a_launchers_dir("/dev/shm", "hyperpipe-shm-test-orphan-" + tag, a_gone_pid());
    const fs::path live = a_launchers_dir("/dev/shm", "hyperpipe-shm-test-live-" + tag, ::getpid());
    std::string rings;
    {
      StartDir dir(places);
      rings = dir.shm_dir();
      EXPECT_EQ(dir.shm_dir(), rings);  // made once
      EXPECT_TRUE(fs::is_directory(rings));
      EXPECT_EQ(fs::status(rings).permissions() & fs::perms::all, fs::perms::owner_all);
      EXPECT_EQ(owner_of(rings), ::getpid());
      const bool in_memory = room && memory;
      const fs::path expected_parent = in_memory ? fs::path("/dev/shm") : fs::path(dir.store_path()).parent_path();
      EXPECT_EQ(fs::path(rings).parent_path(), expected_parent);
      // Only the rings made in /dev/shm sweep /dev/shm.
      EXPECT_EQ(fs::exists(orphan), !in_memory) << "room " << room;
      EXPECT_TRUE(fs::exists(live)) << "the rings of a running launcher were removed";
    }
    EXPECT_FALSE(fs::exists(rings));
    fs::remove_all(orphan);
    fs::remove_all(live);
    fs::remove_all(places.tmp);
  }
}

}  // namespace
}  // namespace hp::launch
