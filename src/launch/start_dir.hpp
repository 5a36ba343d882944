// StartDir: the private directory of one start of a node's ranks: the job's
// store file on one node (HYPERPIPE_STORE_PATH: the ranks keep their
// rendezvous store in a file, c10d's FileStore, rather than behind a TCP
// port, so that nothing on the network can reach it) and each rank's error
// file (TORCHELASTIC_ERROR_FILE, error_file.hpp). Made by mkdtemp under
// TMPDIR (else /tmp) with mode 0700, so that no other user of the host can
// open it either. On request also a private directory for the ranks'
// shared-memory rings (HYPERPIPE_SHM_DIR), under /dev/shm where it is a
// writable memory file system with 1 GiB free, else inside the first. Each
// directory holds its launcher's pid (launcher.pid); making one removes the
// directories beside it whose launcher is gone (killed with -9), so a killed
// launcher leaves nothing behind once the next one on the host has run.
//
// Contract: made before the first rank starts and destroyed after the last
// one is gone, on the launcher's thread; the destructor removes the directory
// and whatever the ranks left in it, ignoring errors (nothing can be done
// about them at the start's end). Not copyable.
#pragma once

#include <string>

namespace hp::launch {

// Where a StartDir's directories go (tests point them elsewhere).
struct StartDirPlaces {
  std::string tmp;               // the store directory's parent; "": TMPDIR, else /tmp
  std::string shm = "/dev/shm";  // the rings' parent, when a writable memory file system with:
  unsigned long long shm_free_needed = 1ull << 30;  // a container's 64 MiB would fill with 1 MiB rings
};

class StartDir {
 public:
  // Throws std::runtime_error when the directory cannot be created.
  explicit StartDir(StartDirPlaces places = {});
  ~StartDir();
  StartDir(const StartDir&) = delete;
  StartDir& operator=(const StartDir&) = delete;

  std::string store_path() const { return dir_ + "/store"; }
  std::string error_file(int rank) const { return dir_ + "/error-" + std::to_string(rank) + ".json"; }
  // Made on the first call; throws std::runtime_error when it cannot be.
  std::string shm_dir();

 private:
  StartDirPlaces places_;
  std::string dir_;
  std::string shm_dir_;
};

}  // namespace hp::launch
