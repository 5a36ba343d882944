// The machinery every model family's decoder shares (infer/decode_model.hpp):
// one rank's chunks, each keeping a KV cache (model/kv_cache.hpp) per
// (stage, micro-batch) across forward runs, and the receive shapes that
// follow DecodeModel::begin. A family supplies how one chunk decodes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "infer/decode_model.hpp"
#include "model/transformer_config.hpp"
#include "schedule/schedule.hpp"

namespace hp::model {
struct KVCache;
}

namespace hp::infer {

// One chunk of the rank: decode(input, micro, cache) runs the positions after
// the cache's and advances it; the cache is empty at a sequence's start.
struct CachedChunk {
  int stage = 0;
  std::vector<std::pair<std::string, at::Tensor>> parameters;  // global names
  std::function<at::Tensor(const at::Tensor& input, int micro, model::KVCache& cache)> decode;
};

// The shapes between stages: rows x positions x config.residual_width(), in
// config's dtype; a sequence's first run carries prefix_length more
// positions (a VL model's image features). max_positions and vocab_size come
// from config.
DecodeModel cached_decode_model(std::vector<CachedChunk> chunks, const model::TransformerConfig& config,
                                std::int64_t rows, std::int64_t prefix_length = 0);

// mHC is refused when the layout has more than one rank: like Megatron's
// inference wrappers, whose receive buffers carry one residual stream.
void check_decode_streams(const model::TransformerConfig& config, const schedule::ScheduleOptions& layout);

}  // namespace hp::infer
