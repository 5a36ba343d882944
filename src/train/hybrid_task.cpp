#include "train/hybrid_task.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "train/checkpoint.hpp"
#include "train/gpt_task.hpp"

namespace hp::train {

HybridTask::HybridTask(HybridTaskOptions options) : options_(std::move(options)), data_(options_.data) {}

model::HybridStagesOptions HybridTask::stages() const {
  model::HybridStagesOptions s;
  s.config = options_.model;
  s.micro_batch_rows = options_.data.micro_batch_size;
  // Variable lengths: no fixed receive shapes; every message carries its own.
  s.seq_len = options_.data.variable_seq_len ? 0 : options_.data.seq_len;
  return s;
}

void HybridTask::validate(const schedule::ScheduleOptions& layout) const {
  data_.validate(options_.model.base.vocab_size, options_.model.base.max_seq_len,
                 model::HybridPattern::parse(options_.model.pattern).mtp_depth);
  model::check_hybrid_layout(stages(), layout);
}

runtime::RankModel HybridTask::build(const schedule::ScheduleOptions& layout, int rank,
                                     const model::ModelParallel& parallel) const {
  model::HybridStagesOptions s = stages();
  s.config.base.tensor_parallel = parallel.tensor;
  return model::build_hybrid_stages(s, layout, rank);
}

std::vector<runtime::MicroBatch> HybridTask::batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const {
  return data_.batch(index, micro_batches, reads, options_.model.base.seed);
}

std::vector<runtime::MicroBatch> HybridTask::eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const {
  return data_.eval_batch(index, micro_batches, reads, options_.model.base.seed);
}

bool HybridTask::has_eval_data() const { return data_.has_eval_data(); }

std::string HybridTask::checkpoint_metadata() const {
  const auto& m = options_.model;
  auto j = nlohmann::json::parse(gpt_checkpoint_metadata(m.base));
  j.erase("layers");  // the pattern decides them
  j["model"] = "hybrid";
  // Segment boundaries are layout; the layers are not.
  std::string layers;
  for (char c : m.pattern)
    if (c != '|') layers += c;
  j["hybrid-pattern"] = layers;
  j["moe-experts"] = m.moe.num_experts;
  j["moe-top-k"] = m.moe.top_k;  // part of the forward, so of decoding
  j["mamba-state"] = m.mamba.state_size;
  return j.dump();
}

std::string HybridTask::describe() const {
  return "hybrid: " + data_.describe() + " | model.hybrid_pattern " + options_.model.pattern + " | " +
         options_.model.base.describe();
}

model::HybridConfig hybrid_config_from_checkpoint(const CheckpointInfo& info) {
  nlohmann::json j = info.metadata_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(info.metadata_json);
  const std::string model = j.value("model", std::string("gpt"));
  if (model != "hybrid")
    throw std::invalid_argument("train.load " + info.path + ": a checkpoint of the " + model + " model, not a Hybrid model");
  for (const char* key : {"hybrid-pattern", "moe-experts", "mamba-state"})
    if (!j.contains(key))
      throw std::invalid_argument("train.load " + info.path + ": its metadata does not record the Hybrid model's " + key);
  model::HybridConfig c;
  c.pattern = j.at("hybrid-pattern").get<std::string>();
  c.moe.num_experts = j.at("moe-experts").get<int>();
  c.moe.top_k = j.value("moe-top-k", c.moe.top_k);  // recorded since generate decodes Hybrid models
  c.mamba.state_size = j.at("mamba-state").get<int>();
  // The text widths as a GPT's; the pattern decides the layers.
  j["layers"] = model::HybridPattern::parse(c.pattern).layers.size();
  CheckpointInfo text = info;
  text.metadata_json = j.dump();
  c.base = text_config_from_checkpoint(text);
  return c;
}

}  // namespace hp::train
