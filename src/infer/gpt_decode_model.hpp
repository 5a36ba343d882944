// The GPT as a decoder (infer/decode_model.hpp): one rank's chunks of a
// layout, each keeping a KV cache per micro-batch (model/kv_cache.hpp) so a
// new token costs one position. Parameters have the training names, so any
// checkpoint loads into any decoding layout.
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

namespace hp::infer {

// Checks the config and that the layout gives every stage a layer; throws
// std::invalid_argument naming the option (model.num_layers, schedule.pp, ...).
// mHC is refused when the layout has more than one rank: like Megatron's
// inference wrappers, whose receive buffers carry one residual stream.
void check_gpt_decode_layout(const model::TransformerConfig& config, const schedule::ScheduleOptions& layout);

// rows: sequences per micro-batch (the same in every micro).
DecodeModel build_gpt_decode_model(const model::TransformerConfig& config, const schedule::ScheduleOptions& layout,
                                   int rank, std::int64_t rows);

// What a model puts before a sequence's tokens on the first stage (a VL
// model's image features): prefix(micro) is [rows, length, hidden], embedded
// before the tokens of the micro's first run (start 0); `parameters` (global
// names) are the first stage's besides the GPT's.
struct DecodePrefix {
  std::int64_t length = 0;
  std::function<at::Tensor(int micro)> features;
  std::vector<std::pair<std::string, at::Tensor>> parameters;
};

// build_gpt_decode_model with a prefix: the last stage's logits then cover
// the prefix too on a first run, and max_positions leaves room for it.
DecodeModel build_prefixed_decode_model(const model::TransformerConfig& config,
                                        const schedule::ScheduleOptions& layout, int rank, std::int64_t rows,
                                        DecodePrefix prefix);

}  // namespace hp::infer
