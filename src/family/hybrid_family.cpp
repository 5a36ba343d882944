#include "family/hybrid_family.hpp"

#include <stdexcept>

#include "family/gpt_family.hpp"
#include "infer/decode_model.hpp"
#include "infer/hybrid_decode_model.hpp"
#include "train/hybrid_task.hpp"

namespace hp::family {

ModelFamily hybrid_family() {
  ModelFamily f;
  f.name = "hybrid";
  f.title = "Hybrid";
  f.help = "Megatron's Hybrid model: Mamba, attention, MLP and MoE layers from its pattern";
  f.make_task = [](const FamilyOptions& o) -> std::unique_ptr<train::Task> {
    refuse_vision(o, "hybrid");
    const model::TransformerConfig& m = o.model;
    if (m.context_parallel.size > 1)
      throw std::invalid_argument("model.context_parallel.size " + std::to_string(m.context_parallel.size) +
                                  ": model.family hybrid is not context-parallel yet; it works with model.family gpt");
    if (m.tie_embeddings) throw std::invalid_argument("model.tie_embeddings: the Hybrid model keeps its own LM head");
    if (!o.layers_per_stage.empty())
      throw std::invalid_argument("model.layers_per_stage: a Hybrid model's stages are the | segments of "
                                  "model.hybrid_pattern");
    if (m.mtp_num_layers > 0)
      throw std::invalid_argument("model.mtp_num_layers: a Hybrid model's MTP depths are the / parts of "
                                  "model.hybrid_pattern (e.g. 'M*-E/*-/*-' for two)");
    train::HybridTaskOptions h;
    h.model = *o.hybrid;
    h.model.base = m;
    h.model.base.max_seq_len = o.data->seq_len;
    h.model.mtp_loss_scaling = m.mtp_loss_scaling_factor;
    h.data = *o.data;
    return std::make_unique<train::HybridTask>(std::move(h));
  };
  f.profile = [](const FamilyOptions& o) { return emulated_profile(o.model.emulate, o.model.num_layers); };
  f.from_checkpoint = [](const train::CheckpointInfo& info) {
    const model::HybridConfig hybrid = train::hybrid_config_from_checkpoint(info);
    CheckpointModel c = language_model(hybrid.base, info);
    c.check_layout = [hybrid](const schedule::ScheduleOptions& l) { infer::check_hybrid_decode_layout(hybrid, l); };
    c.build = [hybrid](const schedule::ScheduleOptions& l, int rank, const std::vector<Prompt>&) {
      return infer::build_hybrid_decode_model(hybrid, l, rank, 1);
    };
    return c;
  };
  return f;
}

}  // namespace hp::family
