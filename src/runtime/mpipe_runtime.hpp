// MPipeRuntime: one rank's handlers for every MPIPE_* action of an MPipe
// Transpose schedule (spec sections 2-5, DESIGN.md section 2) and the state
// they share during a step.
//
//   MPIPE_PARAM_BROADCAST  rank 0's preprocess parameters -> every replica (c10d
//                          broadcast); a frozen preprocess only at the first
//                          step (load checkpoints before it).
//   MPIPE_TRANSPOSE_FWD    the owner runs the preprocess on its micro's input,
//                          detached; it keeps the graph when it will backprop
//                          it itself (rank 0's own micros, or owner-backward).
//                          T = 0: only the data load.
//   MPIPE_FWD_SEND/RECV    the features (T = 0: the raw input) -> stage 0's
//                          input slot (Executor::set_first_stage_input[_recv]).
//   MPIPE_GRAPH_SEND/RECV  the preprocess input, for rank 0's recompute.
//   MPIPE_TRANSPOSE_BWD    rank 0, after BWD(0, m): backprop dL/dfeatures (the
//                          gradient body0 left on its input) through the
//                          retained graph, or through a recompute from the
//                          shipped input.
//   MPIPE_GRAD_SEND / MPIPE_GRAD_RECV_WITH_BACKWARD / MPIPE_GRAD_REDUCE
//                          owner-backward: dL/dfeatures back to the owner, which
//                          backprops its graph; then the preprocess gradients
//                          are summed over the PP group. Only this run's
//                          contribution is reduced: begin_step() sets the
//                          earlier (accumulated) gradients aside, the reduce
//                          adds them back.
//
// Gradients: in the centralized mode only rank 0's preprocess gets gradients;
// under owner-backward every replica ends the step holding the same sum, and
// only rank 0's counts (Pipeline::named_parameters reports it there alone).
//
// Contract: install() once on the rank's Executor; begin_step() before and
// end_step() after every Executor::run. The preprocess, the process group and
// the executor must outlive this object. Single-threaded.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/grad_snapshot.hpp"
#include "runtime/rank_model.hpp"
#include "schedule/schedule.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::runtime {

class Executor;

// Broadcast traffic, counted by this runtime (c10d collectives are not in
// the ProcessGroup's P2P counters): payload bytes x (PP - 1) receivers.
struct BroadcastStats {
  std::uint64_t step_bytes = 0;   // during the latest step
  std::uint64_t total_bytes = 0;  // since construction
  int broadcasts = 0;             // broadcasts that moved data since construction
};

class MPipeRuntime {
 public:
  // layout.kind must be MPipe; preprocess is null for T = 0 (only the data
  // load is transposed). Throws std::invalid_argument when the module
  // disagrees with layout.mpipe (a preprocess for T = 0, none for T >= 1, a
  // frozen flag that does not match requires_grad of its parameters).
  MPipeRuntime(const schedule::ScheduleOptions& layout, int rank, comm::ProcessGroup* pg,
               std::shared_ptr<Preprocess> preprocess);
  ~MPipeRuntime();

  void install(Executor& executor);
  void begin_step();
  void end_step();

  // Collective. Every rank compares its preprocess (parameter names, shapes,
  // dtypes) with rank 0's; throws std::invalid_argument on every rank, naming
  // the ranks that differ. Nothing to check for T = 0.
  void check_structure();

  bool trainable() const { return trainable_; }
  const BroadcastStats& broadcast_stats() const { return stats_; }
  // The preprocess parameters by global name (empty for T = 0).
  const NamedTensors& parameters() const;
  const std::shared_ptr<Preprocess>& preprocess() const { return preprocess_; }

 private:
  void broadcast();
  void transpose_forward(int micro);
  void transpose_backward(int micro);
  void grad_recv_with_backward(int micro, int peer);
  void grad_reduce();
  at::Tensor micro_input(int micro) const;
  NamedParams trainable_parameters() const;

  schedule::ScheduleOptions layout_;
  int rank_;
  comm::ProcessGroup* pg_;
  std::shared_ptr<Preprocess> preprocess_;
  Executor* executor_ = nullptr;
  bool trainable_ = false;
  bool broadcast_once_ = false;
  BroadcastStats stats_;

  // Per step.
  std::map<int, at::Tensor> features_;  // owner: detached output, until MPIPE_FWD_SEND
  std::map<int, at::Tensor> graphs_;    // output with its graph, until its backward
  GradSnapshot snapshot_;               // owner-backward: gradients of earlier runs
};

}  // namespace hp::runtime
