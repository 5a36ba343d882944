// Rendezvous: how the ranks of one ProcessGroup find each other before Gloo
// connects them (as c10d keeps TCPStore apart from ProcessGroupGloo, and gloo
// has rendezvous/). Internal to src/comm: process_group.cpp is its one user.
//
// The store: with DistEnv::store_path (local jobs), c10d's FileStore there,
// which every rank opens and nothing hosts; with DistEnv::launcher_store (a
// job over several hosts started by `hyperpipe launch`), node 0's launcher
// hosts it (comm/launcher_store.hpp) and every rank is a client; a single
// process without one keeps an in-memory HashStore; otherwise (torchrun)
// rank 0 hosts a TCPStore at
// master_addr:master_port and the other ranks wait until something listens
// there and connect as clients, so start order does not matter. (LibTorch
// 1.13's TCPStore binds every interface, which is why local jobs use neither
// it nor any socket for the store.) Every rank announces itself under the prefix
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
  // The store itself (on rank 0 the TCPStore's server).
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }
  // The port the TCPStore listens on (the chosen one when master_port is 0);
  // 0 for a FileStore or HashStore.
  int port() const { return port_; }

  // Reports this rank connected; rank 0 then waits until every rank has, so
  // that its store outlives everybody's use of it.
  void finish();

  // Throws the CommError of a failed step in forming the group:
  // "rank R: <action>: <message>".
  [[noreturn]] void fail(const std::string& action, const std::string& message) const;

 private:
  // Opens the store file, or: rank 0 hosts the TCPStore; the others wait for
  // it to listen (LibTorch 1.13's client gives up at once otherwise), then
  // connect.
  void connect_store();
  // Waits until every rank has set key_prefix + its rank; names the missing ones.
  void wait_for_all(const std::string& key_prefix, const std::string& what);

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  std::string who_;    // "rank R: "
  std::string where_;  // "MASTER_ADDR:MASTER_PORT" or "file PATH"
  std::string same_;   // what every rank must share to meet, for messages
  std::string limit_;  // the timeout, for messages
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> group_store_;
  int port_ = 0;
};

// Another connection to the store of a job formed with `env` (whose TCPStore,
// if any, listens on `port`), for a thread of its own: c10d's store clients
// are not shared across threads. Throws for a single process's HashStore,
// which only its creator holds.
c10::intrusive_ptr<c10d::Store> connect_to_store(const DistEnv& env, int port, std::chrono::milliseconds timeout);

// The local address of the interface that routes to host:port (where Gloo
// should listen for the other ranks); empty when it cannot be found.
std::string local_address_towards(const std::string& host, int port);

}  // namespace hp::comm
