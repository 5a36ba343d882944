// GptTask: a GPT language model (model/gpt_stages.hpp) on a token source
// (train/lm_data.hpp).
#pragma once

#include <string>

#include "model/gpt_stages.hpp"
#include "train/lm_data.hpp"
#include "train/task.hpp"

namespace hp::train {

struct GptTaskOptions {
  model::TransformerConfig model;     // max_seq_len must cover data.seq_len
  std::vector<int> layers_per_stage;  // --layers-per-stage; empty: even split
  LmDataOptions data;                 // --micro-batch-size --seq-len --data
};

class GptTask : public Task {
 public:
  // Opens the data source; throws std::invalid_argument naming --data.
  explicit GptTask(GptTaskOptions options);
  ~GptTask() override;

  void validate(const schedule::ScheduleOptions& layout) const override;
  runtime::RankModel build(const schedule::ScheduleOptions& layout, int rank,
                           const model::ModelParallel& parallel) const override;
  int tensor_parallel() const override { return options_.model.tensor_parallel.size; }
  int context_parallel() const override { return options_.model.context_parallel.size; }
  std::optional<MemoryEstimate> memory_estimate(const schedule::ScheduleOptions& layout) const override;
  std::vector<runtime::MicroBatch> batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const override;
  std::vector<runtime::MicroBatch> eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const override;
  bool has_eval_data() const override;
  std::string checkpoint_metadata() const override;
  std::string describe() const override;

 private:
  model::GPTStagesOptions stages() const;

  GptTaskOptions options_;
  LmData data_;
};

// The GPT's shape as a checkpoint records it (JSON text), without the layout.
// tokenizer_model: --tokenizer-model's file (recorded by its absolute path), or "" for bytes.
std::string gpt_checkpoint_metadata(const model::TransformerConfig& model, const std::string& tokenizer_model = "");

// What each global stage of a GPT split by `partition` holds on its rank
// (train/memory_estimate.hpp), at micro-batches of `rows` sequences of `seq`
// positions. A VL model's text body is one too.
std::vector<StageFootprint> gpt_footprints(const model::TransformerConfig& model, const model::Partition& partition,
                                           double rows, double seq);

struct CheckpointInfo;
// The GPT a checkpoint holds, back from its metadata; the position table
// gives max_seq_len and the word embedding the dtype. Throws
// std::invalid_argument "--load PATH: ..." for another model family.
model::TransformerConfig gpt_config_from_checkpoint(const CheckpointInfo& info);
// The same for the text body of any family built on the GPT (--model vl).
model::TransformerConfig text_config_from_checkpoint(const CheckpointInfo& info);

}  // namespace hp::train
