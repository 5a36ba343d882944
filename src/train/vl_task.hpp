// VlTask: the VL model (model/vl_stages.hpp) on the embedded synthetic
// captioned images (data/vl_data.hpp). Batch `index` is samples
// [index * rows, (index + 1) * rows) of the stream, rows = micro_batch_size *
// micro_batches; a rank generates only the images it reads (under MPipe, the
// images of the micros it owns), captions wherever stage 0 or the loss needs them.
#pragma once

#include <string>

#include "model/vl_stages.hpp"
#include "train/task.hpp"

namespace hp::train {

struct VlTaskOptions {
  model::TransformerConfig text;      // max_seq_len is set to the patches + caption tokens
  model::VisionConfig vision;
  std::vector<int> layers_per_stage;  // text layers per global stage; empty: even split
  int micro_batch_size = 2;
};

class VlTask : public Task {
 public:
  explicit VlTask(VlTaskOptions options);

  void validate(const schedule::ScheduleOptions& layout) const override;
  runtime::RankModel build(const schedule::ScheduleOptions& layout, int rank,
                           const model::ModelParallel& parallel) const override;
  std::vector<runtime::MicroBatch> batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const override;
  std::vector<runtime::MicroBatch> eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const override;
  bool has_eval_data() const override;
  std::optional<MemoryEstimate> memory_estimate(const schedule::ScheduleOptions& layout) const override;
  std::string checkpoint_metadata() const override;
  std::string describe() const override;

  // The caption's input tokens: the text length of every VL micro-batch.
  static int caption_inputs();

 private:
  std::vector<runtime::MicroBatch> sample(std::uint64_t seed, std::int64_t index, int micro_batches,
                                          const runtime::Reads& reads) const;
  model::VLStagesOptions stages() const;

  VlTaskOptions options_;
};

struct CheckpointInfo;
// The VL model a checkpoint holds (text body and tower), back from its
// metadata. Throws std::invalid_argument "--load PATH: ..." for another family.
model::VLStagesOptions vl_options_from_checkpoint(const CheckpointInfo& info);

}  // namespace hp::train
