// StoreServer: the key-value store of a job over several hosts, hosted by
// node 0's launcher (torchrun's agent does the same) rather than by rank 0,
// so that it outlives any rank and any start of the group, and so that it
// listens on --master-addr's interface alone.
//
// The protocol is hyperpipe's own (store_wire.hpp): LibTorch 1.13's TCPStore
// can bind no single address, and the launcher loads no LibTorch. The ranks
// reach it through comm/launcher_store (a c10d::Store), the other launchers
// through StoreClient.
//
// Contract:
// - The constructor binds addr:port (that address only; port 0 picks a free
//   one) and listens before it returns; it throws std::runtime_error naming
//   addr:port when it cannot. One thread of its own then serves every client,
//   with all signals blocked (the launcher's signal handling stays on the
//   launcher's thread); the destructor stops it and closes every connection.
// - Requests of one connection are answered in order; a wait holds back that
//   connection's later requests (clients are synchronous) until every key
//   exists or its timeout passes.
// - A connection lost without kBye sets each of its wills' keys that is still
//   absent: a launcher killed with -9 leaves its mark for the others.
// - connections() is safe from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace hp::launch {

class StoreServer {
 public:
  StoreServer(const std::string& addr, int port);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const { return port_; }
  // Open client connections now.
  int connections() const { return connections_.load(); }

 private:
  struct State;
  void serve();

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<int> connections_{0};
  std::unique_ptr<State> state_;
  std::thread thread_;
};

}  // namespace hp::launch
