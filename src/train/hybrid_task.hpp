// HybridTask: the Hybrid model (model/hybrid_stages.hpp) as a language model
// on a token source (train/lm_data.hpp).
#pragma once

#include <string>

#include "model/hybrid_stages.hpp"
#include "train/lm_data.hpp"
#include "train/task.hpp"

namespace hp::train {

struct HybridTaskOptions {
  model::HybridConfig model;  // base.max_seq_len must cover data.seq_len
  LmDataOptions data;
};

class HybridTask : public Task {
 public:
  explicit HybridTask(HybridTaskOptions options);

  void validate(const schedule::ScheduleOptions& layout) const override;
  runtime::RankModel build(const schedule::ScheduleOptions& layout, int rank,
                           const model::ModelParallel& parallel) const override;
  int tensor_parallel() const override { return options_.model.base.tensor_parallel.size; }
  std::vector<runtime::MicroBatch> batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const override;
  std::vector<runtime::MicroBatch> eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const override;
  bool has_eval_data() const override;
  std::optional<MemoryEstimate> memory_estimate(const schedule::ScheduleOptions& layout) const override;
  std::string checkpoint_metadata() const override;
  std::string describe() const override;

 private:
  model::HybridStagesOptions stages() const;

  HybridTaskOptions options_;
  LmData data_;
};

struct CheckpointInfo;
// The model a Hybrid checkpoint was saved from (its metadata), for decoding;
// throws std::invalid_argument "--load PATH: ..." for another model's.
model::HybridConfig hybrid_config_from_checkpoint(const CheckpointInfo& info);

}  // namespace hp::train
