#include "infer/gpt_decode_model.hpp"

#include <ATen/ATen.h>

#include <memory>

#include "infer/cached_chunks.hpp"
#include "model/gpt.hpp"
#include "model/gpt_stages.hpp"
#include "model/kv_cache.hpp"
#include "model/partition.hpp"
#include "runtime/module_stage.hpp"

namespace hp::infer {

void check_gpt_decode_layout(const model::TransformerConfig& config, const schedule::ScheduleOptions& layout) {
  config.validate();
  check_decode_streams(config, layout);
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
  auto features = std::make_shared<std::function<at::Tensor(int)>>(std::move(prefix.features));
  std::vector<CachedChunk> chunks;
  for (auto& chunk : model::build_rank_chunks(config, partition, rank)) {
    CachedChunk c;
    c.stage = chunk->stage();
    c.parameters = runtime::parameters_of(*chunk);
    const bool prefixed = c.stage == 0 && prefix.length > 0;
    if (prefixed)
      for (const auto& p : prefix.parameters) c.parameters.push_back(p);
    c.decode = [chunk, features, prefixed](const at::Tensor& x, int micro, model::KVCache& cache) {
      const bool fresh = cache.positions == 0;
      return chunk->decode(x, prefixed && fresh ? (*features)(micro) : at::Tensor(), cache);
    };
    chunks.push_back(std::move(c));
  }
  DecodeModel d = cached_decode_model(std::move(chunks), config, rows, prefix.length);
  d.stages.tied_parameters = model::gpt_tied_parameters(config);
  return d;
}

}  // namespace hp::infer
