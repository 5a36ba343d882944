// GradReducer: averages one pipeline rank's gradients over its data-parallel
// group, once per optimizer step, in buckets that start reducing while the
// backward still runs (DDP's Reducer, Megatron's overlap_grad_reduce, for a
// rank that runs many backward calls per step).
//
// Parameters come in phases. A phase is the parameters of one stage, final
// once the stage's last backward of the step has run, or a rest (MPipe's
// preprocess) final only at the end of the step. Each phase is cut into
// buckets of at most bucket_bytes of one dtype, parameters in reverse order
// (as the backward produces them). arm(phase) before the phase's last
// backward: each parameter's gradient accumulator then marks it ready, and a
// bucket whose parameters all are is launched (its all-reduce posted, not
// waited) once the buckets before it in the phase have been. flush(phase)
// after that backward launches what is left (a parameter without a gradient
// contributes zeros). finish() flushes every phase in order, waits, and
// writes each average into .grad.
//
// Contract: every member of the group builds it with the same phases and
// parameter shapes and calls arm/flush/finish in the same phase order.
// Launches follow bucket order within a phase whenever the hooks fire, so the
// all-reduces match across replicas even where one replica's batch leaves a
// parameter without a gradient. Until finish() the gradients of launched
// buckets must not change. The hooks stay installed for the reducer's
// lifetime and run on the backward's thread; not thread-safe otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/pipeline_stage.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::runtime {

class GradReducer {
 public:
  struct Phase {
    int key = 0;            // the stage index, or any other distinct key
    NamedTensors params;    // parameters without requires_grad are skipped
  };

  GradReducer(std::vector<Phase> phases, comm::ProcessGroup* group, std::int64_t bucket_bytes);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  void arm(int key);
  void flush(int key);
  void finish();

  int num_buckets() const;
  // Buckets of the last finish() whose all-reduce was posted from a gradient
  // hook, i.e. while a backward still ran.
  int launched_in_backward() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::runtime
