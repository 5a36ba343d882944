// Trainer: the training loop of one rank. Every rank of the job runs train()
// with the same options and an equal Task (train/task.hpp: the model and its
// data); the loop is collective (steps, clipping, checkpoints) and knows no
// model: it asks the Task for the rank's stages and batches.
//
// Steps are numbered from 1; options.steps is the number of the last step, so
// a run resumed from a checkpoint of step k runs k+1 .. steps and follows the
// loss trajectory the uninterrupted run would have (batches and learning rates
// depend only on the step number and the seed).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "runtime/pipeline.hpp"
#include "train/measured_trace.hpp"
#include "train/adamw.hpp"
#include "train/checkpoint.hpp"
#include "train/fault_injection.hpp"
#include "train/task.hpp"
#include "train/lr_schedule.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::train {

// The defaults are what `hyperpipe train` runs with no flags: a small model,
// interleaved 1F1B with 2 chunks per rank and 8 micro-batches, about a minute
// on 2 cores.
struct TrainOptions {
  // Schedule (pp = world size / dp) and executor options.
  runtime::PipelineOptions pipeline;
  // --dp: data-parallel replicas of the pipeline; the job's ranks are dp x pp
  // (comm/mesh.hpp's layout), and a step reads dp x --mb micro-batches.
  int dp = 1;
  int grad_accum = 1;                 // --grad-accum: pipeline runs per optimizer step
  // --use-distributed-optimizer: the AdamW state sharded over the dp (x cp)
  // ranks, ZeRO-1 (train/distributed_optimizer.hpp).
  bool distributed_optimizer = false;
  std::int64_t steps = 150;           // --steps: number of the last step
  // --lr --min-lr --warmup-steps (decay over --steps)
  LrScheduleOptions lr = [] {
    LrScheduleOptions l;
    l.max_lr = 3e-3;
    l.min_lr = 3e-4;
    l.warmup_steps = 10;
    return l;
  }();
  AdamWOptions adam;                  // --weight-decay ...
  double clip_grad = 1.0;             // --clip-grad (0 = no clipping)
  std::string save;                   // --save DIR
  std::int64_t save_interval = 0;     // --save-interval
  CheckpointRetention keep;           // --keep-last --keep-every
  std::string save_failures = "stop"; // --save-failures: stop (the job fails) | continue (warn, train on)
  std::string load;                   // --load DIR
  // --init-from FILE: a new run starts from exported weights (weights_file.hpp);
  // a restarted job resumes from its checkpoint instead.
  std::string init_from;
  std::string metrics;                // --metrics FILE (JSON lines, written by rank 0)
  TraceOutputs trace;                 // --trace FILE --timeline FILE.svg --simulate: the last step, measured
  int log_interval = 10;              // --log-interval
  // --eval-interval N: every N steps and after the last, the mean loss over
  // --eval-iters held-out batches (Task::eval_batch) through the
  // forward-only schedule; 0 = never.
  std::int64_t eval_interval = 0;
  int eval_iters = 4;                 // --eval-iters
  FaultInjection fault;               // --inject-fault RANK:STEP:KIND[:START]
  // Which start of the job this is after launch's restarts (--max-restarts;
  // the launcher's HYPERPIPE_RESTART_* variables): 0 the first; after a
  // restart, why the last start ended and when (ms since the epoch, 0 when
  // unknown). A restarted run prints one line (what failed, the step it
  // resumed from, how long after the failure its first step starts) and its
  // first metrics line carries the same as restart, resumed_from_step,
  // recovery_s and restart_reason.
  struct Restart {
    int count = 0;
    std::string reason;
    std::int64_t failed_at_ms = 0;
  } restart;
  // Messages the loop prints itself (a warning) name options as lower layers
  // do ("train.save"); a command turns the names into its flags here.
  std::function<std::string(const std::string&)> name_options = [](const std::string& m) { return m; };

  // Checks what can be checked without a process group (the schedule, the
  // loop's options and, with --load, the checkpoint's model against the
  // task's); throws std::invalid_argument naming the flag.
  void validate(const Task& task) const;
};

// What train() throws when a save failed under train.save_failures stop: the
// job ends, and a restart would meet the same disk (hyperpipe's ranks then exit
// with launch::kExitNoRestart).
struct SaveFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TrainResult {
  std::int64_t first_step = 0;  // first step this run executed
  std::int64_t last_step = 0;
  std::vector<double> losses;   // one per executed step
  // (step, held-out loss) of every evaluation, in order.
  std::vector<std::pair<std::int64_t, double>> eval_losses;
};

TrainResult train(const TrainOptions& options, const Task& task, comm::ProcessGroup* pg);

}  // namespace hp::train
