#include "infer/hybrid_decode_model.hpp"

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "infer/cached_chunks.hpp"
#include "model/hybrid_pattern.hpp"
#include "model/hybrid_stages.hpp"
#include "runtime/module_stage.hpp"

namespace hp::infer {

void check_hybrid_decode_layout(const model::HybridConfig& config, const schedule::ScheduleOptions& layout) {
  config.validate();
  check_decode_streams(config.base, layout);
  model::HybridPattern::parse(config.pattern).stage_layer_counts(layout.pp, layout.vpp);
}

DecodeModel build_hybrid_decode_model(const model::HybridConfig& config, const schedule::ScheduleOptions& layout,
                                      int rank, std::int64_t rows) {
  check_hybrid_decode_layout(config, layout);
  std::vector<CachedChunk> chunks;
  for (int v = 0; v < layout.vpp; ++v) {
    CachedChunk c;
    c.stage = v * layout.pp + rank;
    auto chunk = model::build_hybrid_chunk(config, layout, c.stage);
    c.parameters = runtime::parameters_of(*chunk);
    c.decode = [chunk](const at::Tensor& x, int, model::KVCache& cache) { return chunk->decode(x, cache); };
    chunks.push_back(std::move(c));
  }
  DecodeModel d = cached_decode_model(std::move(chunks), config.base, rows);
  d.stages.tied_parameters = model::hybrid_tied_parameters(config, layout);
  return d;
}

}  // namespace hp::infer
