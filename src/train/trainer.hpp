// Trainer: the training loop of one rank. Every rank of the job runs train()
// with the same options; the loop is collective (steps, clipping, checkpoints).
//
// Steps are numbered from 1; options.steps is the number of the last step, so
// a run resumed from a checkpoint of step k runs k+1 .. steps and follows the
// loss trajectory the uninterrupted run would have (batches and learning rates
// depend only on the step number and the seed).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/pipeline.hpp"
#include "train/adamw.hpp"
#include "train/lr_schedule.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::train {

// Makes one rank fail on purpose at the start of a step, so the job's fault
// handling (peers time out or see the dead connection, the launcher names the
// rank) can be exercised: "exit" ends the process with code 17, "hang" blocks
// it forever.
struct FaultInjection {
  int rank = -1;  // -1: none
  std::int64_t step = 0;
  std::string kind = "exit";  // exit | hang
};

struct TrainOptions {
  runtime::PipelineOptions pipeline;  // schedule (pp = world size), model, executor options
  int micro_batch_size = 2;           // --micro-batch-size: sequences per micro-batch
  int seq_len = 32;                   // --seq-len
  int grad_accum = 1;                 // --grad-accum: pipeline runs per optimizer step
  std::int64_t steps = 60;            // --steps: number of the last step
  LrScheduleOptions lr;               // --lr --min-lr --warmup-steps (decay over --steps)
  AdamWOptions adam;                  // --weight-decay ...
  double clip_grad = 1.0;             // --clip-grad (0 = no clipping)
  std::string data = "embedded";      // --data
  std::string save;                   // --save DIR
  std::int64_t save_interval = 0;     // --save-interval
  std::string load;                   // --load DIR
  std::string metrics;                // --metrics FILE (JSON lines, written by rank 0)
  int log_interval = 10;              // --log-interval
  FaultInjection fault;               // --inject-fault RANK:STEP:exit|hang

  // Checks what can be checked without a process group (model, schedule,
  // partition, data); throws std::invalid_argument naming the flag.
  void validate() const;
};

struct TrainResult {
  std::int64_t first_step = 0;  // first step this run executed
  std::int64_t last_step = 0;
  std::vector<double> losses;   // one per executed step
};

TrainResult train(const TrainOptions& options, comm::ProcessGroup* pg);

}  // namespace hp::train
