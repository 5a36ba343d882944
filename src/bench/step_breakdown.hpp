// Where a pipelined step's time goes, from one traced step: per rank, the
// runtime's own cost beside the compute (bench --overhead), MPipe's own
// work, and the operators LibTorch's profiler sees (bench --profile-ops).
//
// Contract: each function runs one or two more steps of `p` on `micros`
// and zeroes the gradients after; collective over the pipeline's group.
#pragma once

#include <vector>

#include "runtime/microbatch.hpp"
#include "runtime/pipeline.hpp"
#include "train/op_profile.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::bench {

// One rank's traced step, ms: the compute (its waits excluded), the waits
// (for received data inside the actions, for the last sends and the
// reductions after them), posting messages, the rest (the runtime between
// actions), and an AdamW step after it; and the actions the rank ran.
struct StepBreakdown {
  double step = 0, compute = 0, wait = 0, post = 0, rest = 0, optimizer = 0;
  double actions = 0;
  // The runtime's own cost per action, µs: posting and the rest over the
  // actions (the zero-bubble schedules run twice the compute actions).
  double overhead_us_per_action() const { return actions > 0 ? 1000 * (post + rest) / actions : 0; }
};

// One more step traced, and an AdamW step timed after an untimed first
// update (the first creates the state, which later steps do not). `pg`
// (may be null) lines the ranks up before the traced step.
StepBreakdown break_down_step(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros,
                              comm::ProcessGroup* pg);

// MPipe's own work on this rank in one traced step, ms: the parameter
// broadcast and the preprocess backward (its recompute included), what
// makes MPipe slower than its body where the bubble it fills is small.
struct MPipeWork {
  double broadcast = 0, preprocess_backward = 0;
};
MPipeWork mpipe_work(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros);

// One step under LibTorch's profiler: this rank's operators by self time.
std::vector<train::OpTime> profile_step_ops(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros);

}  // namespace hp::bench
