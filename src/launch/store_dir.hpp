// StoreDir: the directory of a local job's store file (HYPERPIPE_STORE_PATH).
// The ranks keep their rendezvous store in a file (c10d's FileStore) rather
// than behind a TCP port, so that nothing on the network can reach it; the
// directory is made by mkdtemp under TMPDIR (else /tmp) with mode 0700, so
// that no other user of the host can open it either.
//
// Contract: made before the first rank starts and destroyed after the last
// one is gone, on the launcher's thread; the destructor removes the directory
// and whatever the ranks left in it, ignoring errors (nothing can be done
// about them at the job's end). Not copyable.
#pragma once

#include <string>

namespace hp::launch {

class StoreDir {
 public:
  // wanted = false makes nothing. Throws std::runtime_error when the directory cannot be created.
  explicit StoreDir(bool wanted);
  ~StoreDir();
  StoreDir(const StoreDir&) = delete;
  StoreDir& operator=(const StoreDir&) = delete;
  // Empty when not wanted.
  std::string path() const { return dir_.empty() ? std::string() : dir_ + "/store"; }

 private:
  std::string dir_;
};

}  // namespace hp::launch
