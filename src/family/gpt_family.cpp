#include "family/gpt_family.hpp"

#include <stdexcept>

#include "infer/decode_model.hpp"
#include "infer/gpt_decode_model.hpp"
#include "model/vision_config.hpp"
#include "train/gpt_task.hpp"

namespace hp::family {

void refuse_vision(const FamilyOptions& o, const std::string& family) {
  if (o.vision->frozen) throw std::invalid_argument("vision.frozen needs model.family vl, not " + family);
}

ModelFamily gpt_family() {
  ModelFamily f;
  f.name = "gpt";
  f.title = "GPT";
  f.help = "a GPT (Megatron's, optionally with mHC and MTP) on a token source";
  f.make_task = [](const FamilyOptions& o) -> std::unique_ptr<train::Task> {
    refuse_vision(o, "gpt");
    train::GptTaskOptions g{o.model, o.layers_per_stage, *o.data};
    g.model.max_seq_len = o.data->seq_len;
    return std::make_unique<train::GptTask>(std::move(g));
  };
  f.profile = [](const FamilyOptions& o) { return emulated_profile(o.model.emulate, o.model.num_layers); };
  f.from_checkpoint = [](const train::CheckpointInfo& info) {
    CheckpointModel c = language_model(train::gpt_config_from_checkpoint(info), info);
    c.check_layout = [config = c.config](const schedule::ScheduleOptions& l) { infer::check_gpt_decode_layout(config, l); };
    c.build = [config = c.config](const schedule::ScheduleOptions& l, int rank, const std::vector<Prompt>&) {
      return infer::build_gpt_decode_model(config, l, rank, 1);
    };
    return c;
  };
  return f;
}

}  // namespace hp::family
