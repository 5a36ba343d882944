#include "train/gpt_task.hpp"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "data/batch_sampler.hpp"
#include "data/token_source.hpp"
#include "runtime/microbatch.hpp"

namespace hp::train {

GptTask::GptTask(GptTaskOptions options) : options_(std::move(options)), source_(data::open_source(options_.data)) {}

GptTask::~GptTask() = default;

model::GPTStagesOptions GptTask::stages() const {
  model::GPTStagesOptions s;
  s.config = options_.model;
  s.layers_per_stage = options_.layers_per_stage;
  s.micro_batch_rows = options_.micro_batch_size;
  s.seq_len = options_.seq_len;
  return s;
}

void GptTask::validate(const schedule::ScheduleOptions& layout) const {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  const auto& o = options_;
  if (o.micro_batch_size < 1) fail("--micro-batch-size must be >= 1, got " + std::to_string(o.micro_batch_size));
  if (o.seq_len < 1) fail("--seq-len must be >= 1, got " + std::to_string(o.seq_len));
  if (o.seq_len > o.model.max_seq_len)
    fail("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's position table (" +
         std::to_string(o.model.max_seq_len) + ")");
  model::check_gpt_layout(stages(), layout);
  if (source_->vocab_size() > o.model.vocab_size)
    fail("--data " + o.data + " has token ids up to " + std::to_string(source_->vocab_size() - 1) +
         " but --vocab is " + std::to_string(o.model.vocab_size));
  if (source_->size() < static_cast<std::size_t>(o.seq_len) + 1)
    fail("--data " + o.data + " is shorter than --seq-len + 1 tokens");
}

runtime::RankModel GptTask::build(const schedule::ScheduleOptions& layout, int rank) const {
  return model::build_gpt_stages(stages(), layout, rank);
}

std::vector<runtime::MicroBatch> GptTask::batch(std::int64_t index, int micro_batches,
                                                const std::vector<int>& input_micros, bool targets) const {
  data::BatchOptions b;
  b.batch_size = options_.micro_batch_size * micro_batches;
  b.seq_len = options_.seq_len;
  b.seed = options_.model.seed;
  const data::Batch batch = data::sample_batch(*source_, b, index);
  const at::Tensor tokens = at::tensor(batch.tokens, at::kLong).view({batch.batch_size, batch.seq_len + 1});
  auto micros = model::lm_micro_batches(runtime::split_microbatches(tokens, micro_batches));
  keep_what_is_read(micros, input_micros, targets);
  return micros;
}

std::string GptTask::checkpoint_metadata() const { return gpt_checkpoint_metadata(options_.model); }

std::string gpt_checkpoint_metadata(const model::TransformerConfig& m) {
  nlohmann::json j;
  j["layers"] = m.num_layers;
  j["hidden"] = m.hidden_size;
  j["heads"] = m.num_attention_heads;
  j["ffn-hidden"] = m.ffn_hidden();
  j["vocab"] = m.vocab_size;
  j["tie-embeddings"] = m.tie_embeddings;
  // mHC adds parameters: a checkpoint with other streams does not load.
  if (m.enable_mhc_connections) j["mhc-streams"] = m.mhc_num_residual_streams;
  return j.dump();
}

std::string GptTask::describe() const {
  return "gpt: micro-batch-size=" + std::to_string(options_.micro_batch_size) +
         " seq-len=" + std::to_string(options_.seq_len) + " | " + options_.model.describe();
}

}  // namespace hp::train
