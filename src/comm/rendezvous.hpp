// Rendezvous: how the ranks of one ProcessGroup find each other before Gloo
// connects them (as c10d keeps TCPStore apart from ProcessGroupGloo, and gloo
// has rendezvous/). Internal to src/comm: process_group.cpp is its one user.
//
// Rank 0 hosts a TCPStore at master_addr:master_port; the other ranks wait
// until something listens there and connect as clients, so start order does
// not matter. Every rank announces itself under the prefix
// "hyperpipe/<group_name>/" and waits until all have.
//
// Contract: every failure is a CommError with op "rendezvous" whose message
// starts "rank R: ", names the store address, the missing ranks (when some
// did not show up within the timeout) and what to check. Rank 0 must keep its
// Rendezvous (or store()) alive until finish() returned: the others use its
// store until then. One thread.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

#include "comm/dist_env.hpp"
#include "comm/process_group.hpp"

namespace hp::comm {

class Rendezvous {
 public:
  // Hosts or connects to the store and returns once every rank has joined.
  // Connecting is bounded by options.timeout; each later store wait gets the
  // full timeout again.
  Rendezvous(const DistEnv& env, const ProcessGroupOptions& options);

  // The store under the group's prefix; Gloo keeps its keys below it.
  const c10::intrusive_ptr<c10d::Store>& group_store() const { return group_store_; }
  // The TCPStore itself (on rank 0 its server).
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  // The port the store listens on (the chosen one when master_port is 0).
  int port() const { return port_; }

  // Reports this rank connected; rank 0 then waits until every rank has, so
  // that its store outlives everybody's use of it.
  void finish();

  // Throws the CommError of a failed step in forming the group:
  // "rank R: <action>: <message>".
  [[noreturn]] void fail(const std::string& action, const std::string& message) const;

 private:
  // Rank 0 hosts the TCPStore; the others wait for it to listen (LibTorch
  // 1.13's client gives up at once otherwise), then connect.
  void connect_store();
  // Waits until every rank has set key_prefix + its rank; names the missing ones.
  void wait_for_all(const std::string& key_prefix, const std::string& what);

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  std::string who_;    // "rank R: "
  std::string where_;  // "MASTER_ADDR:MASTER_PORT"
  std::string limit_;  // the timeout, for messages
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> group_store_;
  int port_ = 0;
};

// The local address of the interface that routes to host:port (where Gloo
// should listen for the other ranks); empty when it cannot be found.
std::string local_address_towards(const std::string& host, int port);

}  // namespace hp::comm
