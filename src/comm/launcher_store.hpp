// LauncherStore: the job's store as c10d sees it (a c10d::Store) when node 0's
// launcher hosts it (launch/store_server.hpp), which `hyperpipe launch
// --nnodes N` does: every rank is a client, none hosts, so the store outlives
// any rank and listens on --master-addr's interface alone.
//
// Contract: keys live under `prefix` (one start of the group: the store
// outlives restarts, and each start meets under its own prefix). get() and
// wait() block up to the store's timeout and then throw a c10::Error whose
// message says "timeout"; a lost connection throws one naming the store.
// Like c10d's TCPStore, one instance is for one thread; clone() (LibTorch 2)
// opens another connection.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace hp::launch {
class StoreClient;
}

namespace hp::comm {

class LauncherStore : public c10d::Store {
 public:
  // Connects within `timeout` (the launcher may not listen yet).
  LauncherStore(std::string host, int port, std::string prefix, std::chrono::milliseconds timeout);
  ~LauncherStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // Overrides LibTorch 2's pure virtual clone(); without `override` it
  // compiles against 1.13 too, whose Store has none.
  virtual c10::intrusive_ptr<c10d::Store> clone();

 private:
  std::vector<std::string> keys_of(const std::vector<std::string>& keys) const;
  // Runs one client call, turning its StoreError into c10::Error.
  template <typename F>
  auto guarded(const char* what, F&& f) -> decltype(f());

  std::string host_;
  int port_;
  std::string prefix_;
  std::unique_ptr<launch::StoreClient> client_;
};

}  // namespace hp::comm
