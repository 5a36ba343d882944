#include "train/gpt_task.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

#include "model/partition.hpp"
#include "train/checkpoint.hpp"

namespace hp::train {

GptTask::GptTask(GptTaskOptions options) : options_(std::move(options)), data_(options_.data) {}

GptTask::~GptTask() = default;

model::GPTStagesOptions GptTask::stages() const {
  model::GPTStagesOptions s;
  s.config = options_.model;
  s.layers_per_stage = options_.layers_per_stage;
  s.micro_batch_rows = options_.data.micro_batch_size;
  // Variable lengths: no fixed receive shapes; every message carries its own.
  s.seq_len = options_.data.variable_seq_len ? 0 : options_.data.seq_len;
  return s;
}

void GptTask::validate(const schedule::ScheduleOptions& layout) const {
  const auto& m = options_.model;
  if (options_.data.variable_seq_len && (m.context_parallel.size > 1 || m.tensor_parallel.sequence_parallel))
    throw std::invalid_argument(std::string("data.variable_seq_len with ") +
                                (m.context_parallel.size > 1 ? "model.context_parallel.size" : "model.tensor_parallel.sequence_parallel") +
                                ": the sequence is split into equal shards, which needs one fixed data.seq_len");
  data_.validate(options_.model.vocab_size, options_.model.max_seq_len, options_.model.mtp_num_layers);
  model::check_gpt_layout(stages(), layout);
}

runtime::RankModel GptTask::build(const schedule::ScheduleOptions& layout, int rank,
                                  const model::ModelParallel& parallel) const {
  model::GPTStagesOptions s = stages();
  const bool sequence_parallel = s.config.tensor_parallel.sequence_parallel;
  s.config.tensor_parallel = parallel.tensor;
  s.config.tensor_parallel.sequence_parallel = sequence_parallel && parallel.tensor.size > 1;
  s.config.context_parallel = parallel.context;
  return model::build_gpt_stages(s, layout, rank);
}

std::vector<runtime::MicroBatch> GptTask::batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const {
  return data_.batch(index, micro_batches, reads, options_.model.seed);
}

std::vector<runtime::MicroBatch> GptTask::eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const {
  return data_.eval_batch(index, micro_batches, reads, options_.model.seed);
}

bool GptTask::has_eval_data() const { return data_.has_eval_data(); }

std::vector<StageFootprint> gpt_footprints(const model::TransformerConfig& m, const model::Partition& partition,
                                           double rows, double seq) {
  const double h = m.hidden_size, v = m.vocab_size, f = m.ffn_hidden(), n = m.residual_streams();
  const double tp = m.tensor_parallel.size, cp = m.context_parallel.size;
  const double hc = m.enable_mhc_connections ? 2 * ((n * n + 2 * n) * (n * h + 1) + 3) : 0;
  const double layer = attention_parameters(h, tp) + mlp_parameters(h, f, tp) + 4 * h + hc;  // and two norms
  const double embedding = v * h / tp;
  const double mtp = m.mtp_num_layers * (layer + 2 * h * h + 4 * h);
  const double per_layer = transformer_layer_activation_bytes(seq / cp, rows, h, m.num_attention_heads, n, tp,
                                                              model::dtype_bytes(m.dtype));
  std::vector<StageFootprint> footprints(partition.num_stages());
  for (int s = 0; s < partition.num_stages(); ++s) {
    StageFootprint& fp = footprints[s];
    fp.parameters = partition.count(s) * layer;
    if (s == 0) fp.parameters += embedding + m.max_seq_len * h;
    if (s == partition.num_stages() - 1) fp.parameters += 2 * h + embedding + mtp;
    fp.activation_bytes = partition.count(s) * per_layer;
  }
  return footprints;
}

std::optional<MemoryEstimate> GptTask::memory_estimate(const schedule::ScheduleOptions& layout) const {
  const model::TransformerConfig& m = options_.model;
  return estimate_memory(gpt_footprints(m, model::gpt_partition(stages(), layout), options_.data.micro_batch_size,
                                        m.max_seq_len),
                         layout, model::dtype_bytes(m.dtype));
}

std::string GptTask::checkpoint_metadata() const {
  return gpt_checkpoint_metadata(options_.model, options_.data.tokenizer_model);
}

std::string gpt_checkpoint_metadata(const model::TransformerConfig& m, const std::string& tokenizer_model) {
  nlohmann::json j;
  if (!tokenizer_model.empty()) j["tokenizer-model"] = std::filesystem::absolute(tokenizer_model).string();
  j["layers"] = m.num_layers;
  j["hidden"] = m.hidden_size;
  j["heads"] = m.num_attention_heads;
  j["ffn-hidden"] = m.ffn_hidden();
  j["vocab"] = m.vocab_size;
  j["tie-embeddings"] = m.tie_embeddings;
  j["seq-len"] = m.max_seq_len;  // the learned position embedding's rows
  // mHC adds parameters: a checkpoint with other streams does not load.
  if (m.enable_mhc_connections) {
    j["mhc-streams"] = m.mhc_num_residual_streams;
    j["mhc-sinkhorn-iterations"] = m.mhc_sinkhorn_iterations;  // part of the forward, so of decoding
  }
  if (m.mtp_num_layers > 0) j["mtp-layers"] = m.mtp_num_layers;
  return j.dump();
}

model::TransformerConfig gpt_config_from_checkpoint(const CheckpointInfo& info) {
  const nlohmann::json j = info.metadata_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(info.metadata_json);
  if (j.contains("model"))
    throw std::invalid_argument("train.load " + info.path + ": a checkpoint of the " + j.at("model").get<std::string>() +
                                " model, not a GPT");
  return text_config_from_checkpoint(info);
}

model::TransformerConfig text_config_from_checkpoint(const CheckpointInfo& info) {
  auto fail = [&](const std::string& m) { throw std::invalid_argument("train.load " + info.path + ": " + m); };
  const nlohmann::json j = info.metadata_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(info.metadata_json);
  for (const char* key : {"layers", "hidden", "heads", "ffn-hidden", "vocab"})
    if (!j.contains(key)) fail(std::string("its metadata does not record the GPT's ") + key);
  model::TransformerConfig m;
  m.num_layers = j.at("layers").get<int>();
  m.hidden_size = j.at("hidden").get<int>();
  m.num_attention_heads = j.at("heads").get<int>();
  m.ffn_hidden_size = j.at("ffn-hidden").get<int>();
  m.vocab_size = j.at("vocab").get<int>();
  m.tie_embeddings = j.value("tie-embeddings", false);
  m.mtp_num_layers = j.value("mtp-layers", 0);
  if (j.contains("mhc-streams")) {
    m.enable_mhc_connections = true;
    m.mhc_num_residual_streams = j.at("mhc-streams").get<int>();
    m.mhc_sinkhorn_iterations = j.value("mhc-sinkhorn-iterations", m.mhc_sinkhorn_iterations);
  }
  bool found = false;
  for (const CheckpointEntry& e : info.params) {
    if (e.name == "embedding.position.weight" && e.shape.size() == 2) {
      m.max_seq_len = static_cast<int>(e.shape[0]);
      m.dtype = e.dtype == "Double" ? model::DType::Float64 : model::DType::Float32;
      found = true;
    }
  }
  if (!found) fail("it holds no embedding.position.weight [positions, hidden]");
  return m;
}

std::string GptTask::describe() const {
  return "gpt: " + data_.describe() + " | " + options_.model.describe();
}

}  // namespace hp::train
