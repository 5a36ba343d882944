#include "model/hybrid_stages.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

#include "model/gpt_stages.hpp"
#include "model/lm_loss.hpp"
#include "model/tensor_parallel.hpp"
#include "model/mtp.hpp"
#include "runtime/module_stage.hpp"

namespace hp::model {

void check_hybrid_layout(const HybridStagesOptions& o, const schedule::ScheduleOptions& layout) {
  o.config.validate();
  const HybridPattern pattern = HybridPattern::parse(o.config.pattern);
  const std::vector<int> counts = pattern.stage_layer_counts(layout.pp, layout.vpp);
  if (pattern.mtp_depth > 0 && o.config.base.enable_mhc_connections && counts.size() > 1 && counts.back() == 0)
    throw std::invalid_argument(
        "model.hybrid_pattern: the final stage's segment is empty, which makes it a standalone MTP stage; with mHC "
        "the MTP block needs the multi-stream decoder result and its contraction on the final post_process chunk, "
        "so give the last segment a decoder layer");
  if (o.config.moe.overlap_expert_parallel_comm) {
    if (o.config.base.enable_mhc_connections && layout.pp > 1)
      throw std::invalid_argument("model.overlap_moe_expert_parallel_comm with model.enable_mhc_connections and schedule.pp " +
                                  std::to_string(layout.pp) +
                                  ": overlapping the expert all-to-all is not supported with mHC pipeline parallelism "
                                  "(as Megatron-LM rejects it); drop model.overlap_moe_expert_parallel_comm");
    throw std::invalid_argument("model.overlap_moe_expert_parallel_comm overlaps the all-to-all of expert parallelism, "
                                "which hyperpipe does not have (its experts are split by model.tensor_parallel.size); "
                                "drop model.overlap_moe_expert_parallel_comm");
  }
  if (layout.transposed_layers() > 0)
    throw std::invalid_argument("schedule.mpipe.transpose_layers " + std::to_string(layout.mpipe.transpose_layers) +
                                ": MPipe transposes a GPT's or a VL tower's first layers; a Hybrid model takes "
                                "schedule.mpipe.transpose_layers 0 (the data load only)");
}

std::shared_ptr<HybridChunk> build_hybrid_chunk(const HybridConfig& config, const schedule::ScheduleOptions& layout,
                                                int stage) {
  const std::vector<int> counts = HybridPattern::parse(config.pattern).stage_layer_counts(layout.pp, layout.vpp);
  int begin = 0;
  for (int s = 0; s < stage; ++s) begin += counts[s];
  return std::make_shared<HybridChunk>(config, begin, begin + counts[stage], stage == 0,
                                       stage == layout.num_stages() - 1);
}

std::vector<std::string> hybrid_tied_parameters(const HybridConfig& config, const schedule::ScheduleOptions& layout) {
  if (HybridPattern::parse(config.pattern).mtp_depth > 0 && layout.num_stages() > 1) return {"embedding.word.weight"};
  return {};
}

runtime::RankModel build_hybrid_stages(const HybridStagesOptions& o, const schedule::ScheduleOptions& layout,
                                       int rank) {
  check_hybrid_layout(o, layout);
  HybridConfig config = o.config;
  config.aux_loss_scale = 1.0 / layout.micro_batches;
  runtime::RankModel m;
  std::shared_ptr<MultiTokenPrediction> mtp;
  for (int c = 0; c < layout.vpp; ++c) {
    auto chunk = build_hybrid_chunk(config, layout, layout.stage_of(rank, c));
    if (chunk->mtp()) mtp = chunk->mtp();
    runtime::PipelineStage st;
    st.index = layout.stage_of(rank, c);
    st.parameters = runtime::parameters_of(*chunk);
    const auto shards = tensor_parallel_shards(*chunk);
    m.tensor_parallel.insert(shards.begin(), shards.end());
    st.forward = [chunk](const at::Tensor& x, const runtime::MicroBatch& micro) {
      return chunk->forward(x, micro.target);
    };
    m.stages.push_back(std::move(st));
  }
  m.loss = [tp = config.base.tensor_parallel](const at::Tensor& logits, const at::Tensor& labels) {
    return lm_loss(logits, labels, tp);
  };
  m.tied_parameters = hybrid_tied_parameters(config, layout);
  const int mtp_depth = HybridPattern::parse(config.pattern).mtp_depth;
  if (mtp_depth > 0) add_mtp_metrics(m, mtp_depth, mtp);
  if (o.micro_batch_rows > 0 && o.seq_len > 0)
    m.output_spec = fixed_output_spec(o.micro_batch_rows, o.seq_len, config.base);
  return m;
}

}  // namespace hp::model
