#include "train/hybrid_task.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "model/hybrid_pattern.hpp"
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

namespace {

// One layer's parameters (elements of a tp rank's share) and the elements it
// keeps for backward per micro-batch of `tokens` positions, by kind.
struct HybridLayerFootprint {
  double parameters = 0, activations = 0;
};

HybridLayerFootprint hybrid_layer_footprint(const model::HybridConfig& c, model::LayerKind kind, double tokens) {
  const model::TransformerConfig& m = c.base;
  const double h = m.hidden_size, f = m.ffn_hidden(), n = m.residual_streams(), tp = m.tensor_parallel.size;
  const double a = m.num_attention_heads, s = m.max_seq_len;
  const double mlp = mlp_parameters(h, f, tp), mlp_kept = 19.0 / 2 * tokens * h * (f / (4 * h)) / tp;
  HybridLayerFootprint l;
  l.parameters = 2 * h + (m.enable_mhc_connections ? (n * n + 2 * n) * (n * h + 1) + 3 : 0);  // norm, mHC
  l.activations = 5 * n * tokens * h;  // the residual streams around the sublayer and its norm
  switch (kind) {
    case model::LayerKind::Mamba: {
      const double inner = c.mamba.expand * h, r = static_cast<int>((m.hidden_size + 15) / 16);
      const double state = c.mamba.state_size, kernel = c.mamba.conv_kernel;
      l.parameters += (h * 2 * inner + inner * (kernel + 1) + inner * (r + 2 * state) + r * inner + inner +
                       inner * state + inner + inner * h) / tp;
      // in_proj's output, the convolution's, x_proj's and dt's, the scan's states, its output.
      l.activations += tokens * (2 * inner + inner + r + 2 * state + inner + inner * state + inner) / tp;
      break;
    }
    case model::LayerKind::Attention:
      l.parameters += attention_parameters(h, tp);
      l.activations += (11 * tokens * h + 5 * a * s * tokens) / 2 / tp;
      break;
    case model::LayerKind::MLP:
      l.parameters += mlp;
      l.activations += mlp_kept;
      break;
    case model::LayerKind::MoE:
      l.parameters += h * c.moe.num_experts + c.moe.num_experts * mlp;
      l.activations += c.moe.top_k * mlp_kept + tokens * c.moe.num_experts;
      break;
  }
  return l;
}

}  // namespace

std::optional<MemoryEstimate> HybridTask::memory_estimate(const schedule::ScheduleOptions& layout) const {
  const model::HybridConfig& c = options_.model;
  const model::TransformerConfig& m = c.base;
  const model::HybridPattern pattern = model::HybridPattern::parse(c.pattern);
  const std::vector<int> counts = pattern.stage_layer_counts(layout.pp, layout.vpp);
  const double h = m.hidden_size, n = m.residual_streams(), tp = m.tensor_parallel.size;
  const double tokens = static_cast<double>(options_.data.micro_batch_size) * m.max_seq_len;
  const double element = model::dtype_bytes(m.dtype), embedding = m.vocab_size * h / tp;
  const double contraction = m.enable_mhc_connections ? n * n * h + n + 1 : 0;  // weight [n, nC], base, scale
  std::vector<StageFootprint> footprints(counts.size());
  int layer = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    StageFootprint& fp = footprints[s];
    for (int i = 0; i < counts[s]; ++i, ++layer) {
      const HybridLayerFootprint l = hybrid_layer_footprint(c, pattern.layers[layer], tokens);
      fp.parameters += l.parameters;
      fp.activation_bytes += l.activations * element;
    }
    if (s == 0) fp.parameters += embedding + m.max_seq_len * h;
    if (s + 1 < counts.size()) continue;
    fp.parameters += contraction + 2 * h + embedding;  // the final contraction and norm, the LM head
    if (pattern.mtp_depth == 0) continue;
    // Its norms and projections ([C, 2C], or e_proj and h_proj [C, C] and a final norm with mHC) and contraction.
    double depth = 4 * h + 2 * h * h + contraction + (m.enable_mhc_connections ? 2 * h : 0);
    for (model::LayerKind kind : pattern.mtp_layers) {
      const HybridLayerFootprint l = hybrid_layer_footprint(c, kind, tokens);
      depth += l.parameters;
      fp.activation_bytes += pattern.mtp_depth * l.activations * element;
    }
    // The MTP's word embedding: the first stage's own where the model is one stage.
    fp.parameters += (s > 0 ? embedding : 0) + pattern.mtp_depth * depth;
  }
  MemoryEstimate e = estimate_memory(footprints, layout, element);
  e.sized_by = "model.hybrid_pattern, model.hidden_size, model.moe_num_experts, model.mamba_state_size, model.vocab_size";
  return e;
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
  auto j = nlohmann::json::parse(gpt_checkpoint_metadata(m.base, options_.data.tokenizer_model));
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
