#include "family/vl_family.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "data/ppm_image.hpp"
#include "data/vl_data.hpp"
#include "infer/gpt_decode_model.hpp"
#include "infer/vl_decode_model.hpp"
#include "model/layers.hpp"
#include "train/lm_data.hpp"
#include "train/vl_task.hpp"

namespace hp::family {
namespace {

std::unique_ptr<train::Task> make_vl_task(const FamilyOptions& o) {
  const model::TransformerConfig& m = o.model;
  const train::LmDataOptions& data = *o.data;
  if (m.tensor_parallel.size > 1)
    throw std::invalid_argument("model.tensor_parallel.size " + std::to_string(m.tensor_parallel.size) +
                                ": model.family vl is not tensor-parallel yet (its vision tower is whole on each "
                                "rank); it works with model.family gpt and hybrid");
  if (m.context_parallel.size > 1)
    throw std::invalid_argument("model.context_parallel.size " + std::to_string(m.context_parallel.size) +
                                ": model.family vl is not context-parallel yet; it works with model.family gpt");
  if (data.variable_seq_len)
    throw std::invalid_argument("data.variable_seq_len: model.family vl's captions have one length; it applies to "
                                "model.family gpt and hybrid");
  if (data.data != "embedded")
    throw std::invalid_argument("data.data " + data.data +
                                ": model.family vl trains on its own synthetic captioned images; drop data.data");
  if (!data.eval_data.empty())
    throw std::invalid_argument("data.eval_data " + data.eval_data +
                                ": model.family vl evaluates on held-out synthetic images; drop data.eval_data");
  return std::make_unique<train::VlTask>(train::VlTaskOptions{m, *o.vision, o.layers_per_stage, data.micro_batch_size});
}

// A generate.images value: a held-out sample's index (an image the
// checkpoint's training never read) or a PPM file; its prompt is <bos>.
Prompt image_prompt(const model::VLStagesOptions& vl, const std::string& image) {
  const int size = vl.vision.image_size;
  Prompt p;
  p.name = image;
  p.tokens = {data::kVLBos};
  if (!image.empty() && image.find_first_not_of("0123456789") == std::string::npos && image.size() < 16) {
    const std::uint64_t held_out = vl.text.config.seed ^ train::kHeldOutSeedMix;
    const data::VLBatch b = data::make_vl_batch(size, 1, held_out, std::stoll(image));
    p.pixels = b.images;
    p.name = "image " + image + " (drawn: " + data::caption_text(b.captions.data(), data::kVLCaptionTokens) + ")";
    return p;
  }
  try {
    p.pixels = data::read_ppm(image, size);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("generate.images ") + e.what());
  }
  return p;
}

CheckpointModel vl_checkpoint_model(const train::CheckpointInfo& info) {
  const model::VLStagesOptions vl = train::vl_options_from_checkpoint(info);
  CheckpointModel c;
  c.config = vl.text.config;
  c.captions_images = true;
  c.prompt = [vl](const std::string& image) { return image_prompt(vl, image); };
  c.default_new_tokens = data::kVLCaptionTokens - 2;  // a caption's words: what follows the patches
  c.prefix_positions = vl.vision.num_patches();
  c.check_layout = [config = c.config](const schedule::ScheduleOptions& l) { infer::check_gpt_decode_layout(config, l); };
  c.build = [vl](const schedule::ScheduleOptions& l, int rank, const std::vector<Prompt>& prompts) {
    const int s = vl.vision.image_size;
    std::vector<at::Tensor> images;
    for (const auto& p : prompts)
      images.push_back(at::tensor(p.pixels, at::kFloat)
                           .view({1, data::kVLChannels, s, s})
                           .to(model::to_scalar_type(vl.text.config.dtype)));
    return infer::build_vl_decode_model(vl, l, rank, std::move(images));
  };
  c.detokenize = [](const Prompt&, const std::vector<std::int64_t>& ids) {
    const auto eos = std::find(ids.begin(), ids.end(), data::kVLEos);  // ends a caption
    return data::caption_text(ids.data(), static_cast<int>(eos - ids.begin()));
  };
  return c;
}

}  // namespace

ModelFamily vl_family() {
  ModelFamily f;
  f.name = "vl";
  f.title = "VL";
  f.help = "a vision tower + projector before the GPT text body, on synthetic captioned images";
  f.make_task = make_vl_task;
  f.profile = [](const FamilyOptions& o) {
    schedule::ModelProfile p = emulated_profile(o.model.emulate, o.model.num_layers, o.vision->num_layers);
    p.frozen_preprocess = o.vision->frozen;
    return p;
  };
  f.from_checkpoint = vl_checkpoint_model;
  return f;
}

}  // namespace hp::family
