#include "train/gpt_task.hpp"

#include <nlohmann/json.hpp>

namespace hp::train {

GptTask::GptTask(GptTaskOptions options) : options_(std::move(options)), data_(options_.data) {}

GptTask::~GptTask() = default;

model::GPTStagesOptions GptTask::stages() const {
  model::GPTStagesOptions s;
  s.config = options_.model;
  s.layers_per_stage = options_.layers_per_stage;
  s.micro_batch_rows = options_.data.micro_batch_size;
  s.seq_len = options_.data.seq_len;
  return s;
}

void GptTask::validate(const schedule::ScheduleOptions& layout) const {
  data_.validate(options_.model.vocab_size, options_.model.max_seq_len, options_.model.mtp_num_layers);
  model::check_gpt_layout(stages(), layout);
}

runtime::RankModel GptTask::build(const schedule::ScheduleOptions& layout, int rank) const {
  return model::build_gpt_stages(stages(), layout, rank);
}

std::vector<runtime::MicroBatch> GptTask::batch(std::int64_t index, int micro_batches,
                                                const std::vector<int>& input_micros, bool targets) const {
  return data_.batch(index, micro_batches, input_micros, targets, options_.model.seed);
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
  j["seq-len"] = m.max_seq_len;  // the learned position embedding's rows
  // mHC adds parameters: a checkpoint with other streams does not load.
  if (m.enable_mhc_connections) j["mhc-streams"] = m.mhc_num_residual_streams;
  if (m.mtp_num_layers > 0) j["mtp-layers"] = m.mtp_num_layers;
  return j.dump();
}

std::string GptTask::describe() const {
  return "gpt: " + data_.describe() + " | " + options_.model.describe();
}

}  // namespace hp::train
