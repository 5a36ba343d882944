#include "infer/gpt_decode_model.hpp"

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/gpt.hpp"
#include "model/gpt_stages.hpp"
#include "model/kv_cache.hpp"
#include "model/layers.hpp"
#include "model/partition.hpp"
#include "runtime/module_stage.hpp"

namespace hp::infer {
namespace {

// What every stage of the rank shares: each micro's positions of the coming
// run, and each (stage, micro)'s cache.
struct DecodeState {
  std::map<int, std::pair<std::int64_t, std::int64_t>> step;  // micro -> (start, length)
  std::map<std::pair<int, int>, model::KVCache> caches;         // (stage, micro)
};

int micro_of(const runtime::MicroBatch& m) {
  if (!m.extra.defined() || m.extra.numel() != 1)
    throw std::logic_error("a decoding stage needs the micro-batch's index in MicroBatch::extra");
  return static_cast<int>(m.extra.item<std::int64_t>());
}

}  // namespace

void check_gpt_decode_layout(const model::TransformerConfig& config, const schedule::ScheduleOptions& layout) {
  config.validate();
  if (config.enable_mhc_connections && layout.pp > 1)
    throw std::invalid_argument(
        "schedule.pp " + std::to_string(layout.pp) + " with a model of model.mhc_num_residual_streams " +
        std::to_string(config.mhc_num_residual_streams) +
        ": an mHC model decodes only with schedule.pp 1, since the inference pipeline's receive buffers carry one "
        "residual stream (Megatron-LM's inference wrappers reject it the same way, whatever the training layout)");
  model::Partition::even(config.num_layers, layout.pp, layout.vpp);  // throws when a stage would be empty
}

DecodeModel build_gpt_decode_model(const model::TransformerConfig& config, const schedule::ScheduleOptions& layout,
                                   int rank, std::int64_t rows) {
  return build_prefixed_decode_model(config, layout, rank, rows, DecodePrefix{});
}

DecodeModel build_prefixed_decode_model(const model::TransformerConfig& config,
                                        const schedule::ScheduleOptions& layout, int rank, std::int64_t rows,
                                        DecodePrefix prefix) {
  check_gpt_decode_layout(config, layout);
  const model::Partition partition = model::Partition::even(config.num_layers, layout.pp, layout.vpp);
  auto state = std::make_shared<DecodeState>();
  auto features = std::make_shared<std::function<at::Tensor(int)>>(std::move(prefix.features));
  DecodeModel d;
  d.vocab_size = config.vocab_size;
  d.max_positions = config.max_seq_len - prefix.length;
  for (auto& chunk : model::build_rank_chunks(config, partition, rank)) {
    runtime::PipelineStage s;
    s.index = chunk->stage();
    s.parameters = runtime::parameters_of(*chunk);
    const bool prefixed = chunk->stage() == 0 && prefix.length > 0;
    if (prefixed)
      for (const auto& p : prefix.parameters) s.parameters.push_back(p);
    s.forward = [chunk, state, features, prefixed](const at::Tensor& x, const runtime::MicroBatch& micro) {
      const int m = micro_of(micro);
      model::KVCache& cache = state->caches[{chunk->stage(), m}];
      const bool fresh = state->step.at(m).first == 0;
      if (fresh) cache = model::KVCache{};
      return chunk->decode(x, prefixed && fresh ? (*features)(m) : at::Tensor(), cache);
    };
    d.stages.stages.push_back(std::move(s));
  }
  d.stages.loss = [](const at::Tensor&, const at::Tensor&) -> at::Tensor {
    throw std::logic_error("a decoding pipeline computes no loss");
  };
  d.stages.tied_parameters = model::gpt_tied_parameters(config);
  const runtime::TensorSpec act{{rows, 0, config.residual_width()}, model::to_scalar_type(config.dtype)};
  d.stages.output_spec = [state, act, length = prefix.length](int, int micro) {
    runtime::TensorSpec s = act;
    const auto& [start, tokens] = state->step.at(micro);
    s.shape[1] = tokens + (start == 0 ? length : 0);
    return s;
  };
  d.begin = [state](int micro, std::int64_t start, std::int64_t length) { state->step[micro] = {start, length}; };
  return d;
}

}  // namespace hp::infer
