#include "infer/cached_chunks.hpp"

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <stdexcept>

#include "model/kv_cache.hpp"
#include "model/layers.hpp"

namespace hp::infer {
namespace {

// What every chunk of the rank shares: each micro's positions of the coming
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

DecodeModel cached_decode_model(std::vector<CachedChunk> chunks, const model::TransformerConfig& config,
                                std::int64_t rows, std::int64_t prefix_length) {
  auto state = std::make_shared<DecodeState>();
  DecodeModel d;
  d.vocab_size = config.vocab_size;
  d.max_positions = config.max_seq_len - prefix_length;
  for (auto& chunk : chunks) {
    runtime::PipelineStage s;
    s.index = chunk.stage;
    s.parameters = std::move(chunk.parameters);
    s.forward = [stage = chunk.stage, decode = std::move(chunk.decode), state](const at::Tensor& x,
                                                                            const runtime::MicroBatch& micro) {
      const int m = micro_of(micro);
      model::KVCache& cache = state->caches[{stage, m}];
      if (state->step.at(m).first == 0) cache = model::KVCache{};
      return decode(x, m, cache);
    };
    d.stages.stages.push_back(std::move(s));
  }
  d.stages.loss = [](const at::Tensor&, const at::Tensor&) -> at::Tensor {
    throw std::logic_error("a decoding pipeline computes no loss");
  };
  const runtime::TensorSpec act{{rows, 0, config.residual_width()}, model::to_scalar_type(config.dtype)};
  d.stages.output_spec = [state, act, prefix_length](int, int micro) {
    runtime::TensorSpec s = act;
    const auto& [start, tokens] = state->step.at(micro);
    s.shape[1] = tokens + (start == 0 ? prefix_length : 0);
    return s;
  };
  d.begin = [state](int micro, std::int64_t start, std::int64_t length) { state->step[micro] = {start, length}; };
  return d;
}

void check_decode_streams(const model::TransformerConfig& config, const schedule::ScheduleOptions& layout) {
  if (config.enable_mhc_connections && layout.pp > 1)
    throw std::invalid_argument(
        "schedule.pp " + std::to_string(layout.pp) + " with a model of model.mhc_num_residual_streams " +
        std::to_string(config.mhc_num_residual_streams) +
        ": an mHC model decodes only with schedule.pp 1, since the inference pipeline's receive buffers carry one "
        "residual stream (Megatron-LM's inference wrappers reject it the same way, whatever the training layout)");
}

}  // namespace hp::infer
