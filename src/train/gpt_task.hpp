// GptTask: a GPT language model (model/gpt_stages.hpp) on a token source
// (data/token_source.hpp: the embedded corpus, text or pre-tokenized files).
// Batch `index` is micro_batch_size * micro_batches sequences of seq_len + 1
// tokens sampled by data::sample_batch.
#pragma once

#include <string>

#include "model/gpt_stages.hpp"
#include "train/task.hpp"

namespace hp::data {
class TokenSource;
}

namespace hp::train {

struct GptTaskOptions {
  model::TransformerConfig model;     // max_seq_len must cover seq_len
  std::vector<int> layers_per_stage;  // --layers-per-stage; empty: even split
  int micro_batch_size = 2;           // --micro-batch-size: sequences per micro-batch
  int seq_len = 32;                   // --seq-len
  std::string data = "embedded";      // --data
};

class GptTask : public Task {
 public:
  // Opens the data source; throws std::invalid_argument naming --data.
  explicit GptTask(GptTaskOptions options);
  ~GptTask() override;

  void validate(const schedule::ScheduleOptions& layout) const override;
  runtime::RankModel build(const schedule::ScheduleOptions& layout, int rank) const override;
  std::vector<runtime::MicroBatch> batch(std::int64_t index, int micro_batches, const std::vector<int>& input_micros,
                                         bool targets) const override;
  std::string checkpoint_metadata() const override;
  std::string describe() const override;

 private:
  model::GPTStagesOptions stages() const;

  GptTaskOptions options_;
  std::unique_ptr<data::TokenSource> source_;
};

// The GPT's shape as a checkpoint records it (JSON text), without the layout.
std::string gpt_checkpoint_metadata(const model::TransformerConfig& model);

}  // namespace hp::train
