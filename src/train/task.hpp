// Task: what the trainer trains, a model family and its data, handed to
// train() the way Megatron's pretrain() takes a model provider and a dataset
// provider. The trainer knows nothing of any model: GPT (train/gpt_task.hpp),
// VL (train/vl_task.hpp) and any user model are Tasks.
//
// Contract: every rank builds an equal Task; the methods are called from the
// rank's thread. batch() is deterministic in (index, seed), so every rank's
// share of a batch comes from the same global batch and a resumed run sees
// the batches the uninterrupted run would have.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/transformer_config.hpp"
#include "runtime/rank_model.hpp"
#include "train/memory_estimate.hpp"
#include "schedule/schedule.hpp"

namespace hp::train {

class Task {
 public:
  virtual ~Task() = default;
  // Checks the model and the data against the layout before any process
  // group exists; throws std::invalid_argument naming the flag.
  virtual void validate(const schedule::ScheduleOptions& layout) const = 0;
  // This rank's stages, loss, tied names and MPipe preprocess; `parallel`
  // holds the tensor- and context-parallel groups its stages are split over
  // (of sizes tensor_parallel() and context_parallel()), with this rank's
  // place in each (sequence parallelism is the model's option).
  virtual runtime::RankModel build(const schedule::ScheduleOptions& layout, int rank,
                                   const model::ModelParallel& parallel) const = 0;
  // The ranks each stage is split over by Megatron's tensor parallelism (the
  // model's --tp) and context parallelism (--cp); the trainer lays out the
  // job's mesh with them.
  virtual int tensor_parallel() const { return 1; }
  virtual int context_parallel() const { return 1; }
  // Batch `index` as `micro_batches` micro-batches, filled only where this
  // rank reads (runtime::Pipeline::reads()), reading nothing else from its
  // source. With data parallelism this is the global batch of every
  // replica's micro-batches (replica d's are [d * mb, (d + 1) * mb)) and
  // reads.input_micros index into it.
  virtual std::vector<runtime::MicroBatch> batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const = 0;
  // Held-out batch `index` (the same batches at every evaluation, never a
  // training batch), filled like batch(). Only called when has_eval_data().
  virtual std::vector<runtime::MicroBatch> eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const = 0;
  virtual bool has_eval_data() const = 0;
  // What one rank of `layout` will hold (train/memory_estimate.hpp), or
  // nullopt where the task cannot tell; plain AdamW state assumed.
  virtual std::optional<MemoryEstimate> memory_estimate(const schedule::ScheduleOptions& layout) const {
    (void)layout;
    return std::nullopt;
  }
  // What a checkpoint must agree on to load into this model (a JSON object as
  // text; the pipeline layout is not part of it).
  virtual std::string checkpoint_metadata() const = 0;
  // One line for the job's banner.
  virtual std::string describe() const = 0;
};

// Mixed into a task's seed for its held-out batches (Task::eval_batch), so
// they come from their own stream and never repeat a training batch's draw.
inline constexpr std::uint64_t kHeldOutSeedMix = 0x6576616c2d736574ULL;

// Clears what a rank does not read: the input outside reads.input_micros, the
// targets unless reads.targets, the extra data unless reads.extra (both only
// of the micro-batches reads covers).
void keep_what_is_read(std::vector<runtime::MicroBatch>& micros, const runtime::Reads& reads);

}  // namespace hp::train
