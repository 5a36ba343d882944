// ProcessGroup: the ranks of one job, connected over Gloo (TCP), with the
// point-to-point and collective operations the pipeline needs.
//
// Rendezvous (create): the ranks meet on a store: a FileStore at
// DistEnv::store_path (local jobs: nothing listens), node 0's launcher's
// (several hosts, comm/launcher_store.hpp), or a TCPStore that rank 0
// hosts at master_addr:master_port (torchrun), the other ranks connecting as clients
// (retrying until the timeout, so start order does not matter). Every rank announces itself under a PrefixStore of
// the group's name; a rank that does not show up within the timeout is named in
// the error. Gloo then connects the full mesh on the local interface that routes
// to master_addr (loopback for 127.0.0.1), or on GLOO_SOCKET_IFNAME, or on
// ProcessGroupOptions::gloo_address. create() returns on rank 0 only once every
// rank has connected, so rank 0's store outlives everybody's use of it.
//
// Contract:
// - One job's group per process (create() starts the job's store), and any
//   subgroups made from it (new_group); movable,
//   not copyable (a moved-from group may only be destroyed or assigned to).
//   Destroying it closes this rank's connections; peers still talking to it
//   then fail with CommError. All methods must be called from one thread (the rank's main
//   thread); the counters may be read from any thread.
// - Ordering: collectives must be called in the same order on every rank.
//   Point-to-point messages are matched by (source rank, tag): messages with
//   different tags never match each other whatever the posting order, and
//   messages with the same source and tag are received in the order they were
//   sent.
// - Tensors: CPU, strided (dense), any dtype. Non-contiguous tensors are
//   copied into contiguous staging buffers, which the returned Work keeps alive
//   until wait() (and copies back into the caller's tensor for receives,
//   broadcasts and reductions). Sender and receiver of a plain send/recv must
//   agree on the byte size (use P2P::isend_with_meta when shapes vary): Gloo
//   does not report a mismatch. A shorter message silently fills only the
//   start of the receive buffer; a longer one makes Gloo abort the receiving
//   process (an enforce on its I/O thread, which the launcher reports as
//   SIGABRT).
//   A zero-byte transfer sends no message on either side.
// - Timeouts: every operation honours ProcessGroupOptions::timeout (wait()
//   blocks at most that long, counted from the call). Failures and timeouts
//   are CommError (comm_error.hpp); misuse is std::invalid_argument.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm_error.hpp"
#include "comm/dist_env.hpp"
#include "comm/work.hpp"

namespace hp::comm {

struct ProcessGroupOptions {
  // Bound on every rendezvous step and every operation's wait().
  std::chrono::milliseconds timeout = std::chrono::seconds(300);
  // Store prefix of this group; distinct names keep groups on one store apart.
  std::string group_name = "default";
  // Local address (or hostname) Gloo binds to; empty: GLOO_SOCKET_IFNAME if
  // set, else the local address that routes to master_addr.
  std::string gloo_address;
  // Gloo's worker threads for collectives.
  int gloo_threads = 2;
};

enum class ReduceOp { Sum, Product, Min, Max };

// Payload bytes moved by point-to-point operations (meta messages included),
// counted when wait() succeeds; and the blocking all_reduce() calls (Megatron's
// tensor-parallel mappings make these inside a forward or backward), counted
// when they return, with the time from call to return. Other collectives are
// not counted.
struct CommCounters {
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint64_t all_reduces = 0;
  std::uint64_t all_reduce_bytes = 0;
  double all_reduce_us = 0;
};

class ProcessGroup {
 public:
  // Blocks until the group is formed, at most options.timeout per step.
  // Throws CommError naming the missing ranks / the unreachable store.
  static ProcessGroup create(const DistEnv& env, const ProcessGroupOptions& options = {});

  ProcessGroup(ProcessGroup&&) noexcept;
  ProcessGroup& operator=(ProcessGroup&&) noexcept;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;
  ~ProcessGroup();

  // Subgroup (c10d's new_group): a separate Gloo group over `ranks` (ranks of
  // this job's group, in the order that numbers them 0..n-1 within it), on
  // the same store and device. Called by every member, never by others;
  // members create their groups in the same order (each call blocks until all
  // members made it, naming those that did not within the timeout). `name`
  // ("dp", "pp") appears in the subgroup's error messages, which name global
  // ranks. The subgroup keeps the store alive; make it from the job's group.
  ProcessGroup new_group(const std::vector<int>& ranks, const std::string& name) const;

  // This process's rank and the size within this group (a subgroup's own numbering).
  int rank() const;
  int world_size() const;
  // The job-wide rank of this group's member `rank` (itself for the job's group).
  int global_rank(int rank) const;
  const DistEnv& env() const;
  std::chrono::milliseconds timeout() const;
  // The port rank 0's TCPStore listens on (the chosen one when master_port is
  // 0); 0 when the job's store is a file or a single process's memory.
  int store_port() const;
  // Keeps the job's store (on rank 0 its server) alive while held, after the
  // group itself is destroyed: a failing rank 0 closes its connections at once
  // but still serves the store to the peers that survey the job (heartbeat.hpp).
  std::shared_ptr<void> store_keepalive() const;

  // Point-to-point. tag >= 0; dst/src in [0, world_size) and not this rank.
  // `label` (e.g. "Activation(stage 1, micro 3)") is put in error messages.
  Work isend(const at::Tensor& tensor, int dst, int tag, const std::string& label = {});
  // Receives into `tensor` (written in place; read it after wait()).
  Work irecv(const at::Tensor& tensor, int src, int tag, const std::string& label = {});

  // Collectives, in place. Broadcast sends root's values of every tensor to
  // the others (tensors of one dtype travel as one coalesced message); every
  // rank passes tensors of the same shapes and dtypes in the same order.
  Work ibroadcast(const std::vector<at::Tensor>& tensors, int root);
  void broadcast(const std::vector<at::Tensor>& tensors, int root);
  Work iall_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  void all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  // Every rank's `tensor` (same shape and dtype everywhere), stacked by rank:
  // [world_size, ...tensor.sizes()].
  at::Tensor all_gather(const at::Tensor& tensor);
  void barrier();

  CommCounters counters() const;
  std::uint64_t bytes_sent() const;
  std::uint64_t bytes_received() const;
  void reset_counters();

  struct Impl;

 private:
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

std::string reduce_op_name(ReduceOp op);

// Every rank's `row` (the same length everywhere), by rank: one all_gather
// of doubles. A null or one-rank group gives {row}. For small per-rank
// reports (metrics, benchmarks).
std::vector<std::vector<double>> all_gather_rows(ProcessGroup* group, const std::vector<double>& row);

}  // namespace hp::comm
