#include "train/vl_task.hpp"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>

#include "data/vl_data.hpp"
#include "train/checkpoint.hpp"
#include "train/gpt_task.hpp"

namespace hp::train {

VlTask::VlTask(VlTaskOptions options) : options_(std::move(options)) {
  options_.text.max_seq_len = options_.vision.num_patches() + caption_inputs();
}

int VlTask::caption_inputs() { return data::kVLCaptionTokens - 1; }

model::VLStagesOptions VlTask::stages() const {
  model::VLStagesOptions s;
  s.text.config = options_.text;
  s.text.layers_per_stage = options_.layers_per_stage;
  s.text.micro_batch_rows = options_.micro_batch_size;
  s.text.seq_len = caption_inputs();
  s.vision = options_.vision;
  return s;
}

void VlTask::validate(const schedule::ScheduleOptions& layout) const {
  if (options_.micro_batch_size < 1)
    throw std::invalid_argument("data.micro_batch_size must be >= 1, got " + std::to_string(options_.micro_batch_size));
  const int words = static_cast<int>(data::vl_vocabulary().size());
  if (options_.text.vocab_size < words)
    throw std::invalid_argument("model.vocab_size " + std::to_string(options_.text.vocab_size) +
                                " is too small for model.family vl's " + std::to_string(words) + " caption words");
  model::check_vl_layout(stages(), layout);
}

std::optional<MemoryEstimate> VlTask::memory_estimate(const schedule::ScheduleOptions& layout) const {
  const model::VLStagesOptions o = stages();
  const model::TransformerConfig& text = o.text.config;
  const model::VisionConfig& v = o.vision;
  const double rows = options_.micro_batch_size, patches = v.num_patches(), dv = v.hidden_size;
  const double fv = v.ffn_hidden_size > 0 ? v.ffn_hidden_size : 4 * dv, element = model::dtype_bytes(text.dtype);
  std::vector<StageFootprint> footprints =
      gpt_footprints(text, model::gpt_partition(o.text, layout), rows, patches + o.text.seq_len);
  // The tower: blocks [0, T) with the patch embedding in MPipe's preprocess,
  // which every rank holds; the rest and the projector on stage 0.
  const double block = attention_parameters(dv, 1) + mlp_parameters(dv, fv, 1) + 4 * dv;  // and two norms
  const double patch_embed = v.kChannels * v.patch_size * v.patch_size * dv + dv + patches * dv;
  const double projector = 2 * dv + dv * text.hidden_size + text.hidden_size;
  const int t = layout.kind == schedule::ScheduleKind::MPipe ? layout.transposed_layers() : 0;
  const double replicated = t > 0 ? t * block + patch_embed + (t == v.num_layers ? projector : 0) : 0;
  footprints[0].parameters += (v.num_layers - t) * block + (t == 0 ? patch_embed : 0) + (t < v.num_layers ? projector : 0);
  footprints[0].activation_bytes +=
      v.num_layers * transformer_layer_activation_bytes(patches, rows, dv, v.num_attention_heads, 1, 1, element);
  MemoryEstimate e = estimate_memory(footprints, layout, element, replicated);
  e.sized_by = "model.num_layers, model.hidden_size, vision.num_layers, vision.hidden_size, vision.image_size";
  return e;
}

runtime::RankModel VlTask::build(const schedule::ScheduleOptions& layout, int rank,
                                 const model::ModelParallel&) const {
  return model::build_vl_stages(stages(), layout, rank);
}

std::vector<runtime::MicroBatch> VlTask::sample(std::uint64_t seed, std::int64_t index, int micro_batches,
                                                const runtime::Reads& reads) const {
  const int rows = options_.micro_batch_size;
  const int s = options_.vision.image_size;
  const auto dtype = options_.text.dtype == model::DType::Float64 ? at::kDouble : at::kFloat;
  const std::set<int> read(reads.input_micros.begin(), reads.input_micros.end());
  std::vector<at::Tensor> captions, images;
  for (int m = 0; m < micro_batches; ++m) {
    const std::int64_t first = (index * micro_batches + m) * rows;
    data::VLBatch b = data::make_vl_batch(s, rows, seed, first, read.count(m) > 0);
    captions.push_back(at::tensor(b.captions, at::kLong).view({rows, data::kVLCaptionTokens}));
    images.push_back(b.images.empty() ? at::Tensor()
                                      : at::tensor(b.images, at::kFloat).view({rows, data::kVLChannels, s, s}).to(dtype));
  }
  auto micros = model::vl_micro_batches(captions, images);
  keep_what_is_read(micros, reads);
  return micros;
}

std::vector<runtime::MicroBatch> VlTask::batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const {
  return sample(options_.text.seed, index, micro_batches, reads);
}

std::vector<runtime::MicroBatch> VlTask::eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads) const {
  return sample(options_.text.seed ^ kHeldOutSeedMix, index, micro_batches, reads);
}

bool VlTask::has_eval_data() const { return true; }

std::string VlTask::checkpoint_metadata() const {
  const model::VisionConfig& v = options_.vision;
  auto j = nlohmann::json::parse(gpt_checkpoint_metadata(options_.text));
  // A frozen tower has the same shape: freezing may change between runs.
  j["model"] = "vl";
  j["vision-layers"] = v.num_layers;
  j["image-size"] = v.image_size;
  j["patch-size"] = v.patch_size;
  j["vision-hidden"] = v.hidden_size;
  j["vision-heads"] = v.num_attention_heads;
  j["seed"] = options_.text.seed;  // generate --image N draws from its held-out images
  return j.dump();
}

std::string VlTask::describe() const {
  const auto& v = options_.vision;
  return "vl: micro-batch-size=" + std::to_string(options_.micro_batch_size) + " | " + options_.text.describe() +
         " | vision.num_layers " + std::to_string(v.num_layers) + " vision.image_size " + std::to_string(v.image_size) +
         (v.frozen ? " (frozen)" : "");
}

model::VLStagesOptions vl_options_from_checkpoint(const CheckpointInfo& info) {
  const nlohmann::json j = info.metadata_json.empty() ? nlohmann::json::object() : nlohmann::json::parse(info.metadata_json);
  if (j.value("model", std::string("gpt")) != "vl")
    throw std::invalid_argument("train.load " + info.path + ": a checkpoint of the " + j.value("model", std::string("gpt")) +
                                " model, not a VL model");
  model::VLStagesOptions o;
  o.text.config = text_config_from_checkpoint(info);
  o.vision.num_layers = j.at("vision-layers").get<int>();
  o.vision.image_size = j.at("image-size").get<int>();
  o.vision.patch_size = j.at("patch-size").get<int>();
  o.vision.hidden_size = j.at("vision-hidden").get<int>();
  o.vision.num_attention_heads = j.at("vision-heads").get<int>();
  o.text.config.seed = j.value("seed", o.text.config.seed);  // older checkpoints: the default --seed
  return o;
}

}  // namespace hp::train
