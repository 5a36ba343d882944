// NodeGroup: the launchers of one job over several hosts (--nnodes), meeting
// on the store node 0's launcher hosts (store_server.hpp), so that a start of
// the group, its end and its restarts are one decision for every node.
//
// Starts are numbered 0, 1, ...: start g is the job's (g)th restart. Keys, all
// under "launch/": "start" (the newest start any launcher entered),
// "<g>/ready/<node>", "<g>/failed" (the first failure recorded for start g,
// with whether a restart may follow and when it was seen) and
// "<g>/done/<node>". A start's ranks keep their keys under rank_prefix(g).
//
// Contract:
// - The constructor (node 0: hosts the store on master_addr:master_port, that
//   interface alone) connects within rendezvous_timeout, else throws
//   StoreError.
// - begin() enters the next start and returns once every node's launcher has
//   entered it, or once that start failed (a launcher lost at the barrier); it
//   throws NodeGroupTimeout naming the nodes that did not come within
//   rendezvous_timeout, and returns nullopt when `interrupted` says so. A
//   launcher started again after a kill -9 joins the start after the one it
//   left (its lost connection recorded that start as failed: every start
//   carries a will, store_server.hpp).
// - fail() records a failure of the current start unless one is already
//   there, and returns the recorded one; failure() reads it (one round trip,
//   for the launcher's poll loop). finish() reports this node's ranks done
//   and waits until every node's are (true) or the start failed (false; a
//   node not done within rendezvous_timeout is recorded as its failure).
// - StoreError from any call: node 0's launcher (the store) is gone.
// - One thread (the launcher's).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/start_failure.hpp"

namespace hp::launch {

struct LaunchOptions;
class StoreClient;
class StoreServer;

class NodeGroupTimeout : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

class NodeGroup {
 public:
  explicit NodeGroup(const LaunchOptions& options);
  ~NodeGroup();
  NodeGroup(const NodeGroup&) = delete;
  NodeGroup& operator=(const NodeGroup&) = delete;

  std::optional<int> begin(const std::function<bool()>& interrupted);
  int start() const { return start_; }
  static std::string rank_prefix(int start) { return "start/" + std::to_string(start) + "/"; }

  std::optional<StartFailure> failure();
  StartFailure fail(const StartFailure& f);
  bool finish(const std::function<bool()>& interrupted);

  // The failure that ended the start before `start` (a restarted launcher's
  // ranks say it); nullopt at start 0.
  std::optional<StartFailure> previous_failure();

  // Leaves on purpose (no will fires); node 0 first waits up to `limit` for
  // the other launchers to leave, as they still read the store.
  void leave(std::chrono::milliseconds limit);

 private:
  std::string key(int start, const std::string& what) const;
  // key(start_, what + "/" + node) of every node.
  std::vector<std::string> node_keys(const std::string& what) const;
  // The nodes whose node_keys(...) entry is not set yet.
  std::vector<int> missing(const std::vector<std::string>& keys);
  std::optional<StartFailure> failure_of(int start);

  const int nnodes_;
  const int node_;
  const std::chrono::milliseconds rendezvous_timeout_;
  std::unique_ptr<StoreServer> server_;  // node 0 only
  std::unique_ptr<StoreClient> client_;
  int start_ = -1;  // the start entered last; -1: none yet
  int next_ = 0;    // the start begin() enters
};

}  // namespace hp::launch
