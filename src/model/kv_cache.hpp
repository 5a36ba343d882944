// KVCache: what a decoder keeps between calls so that a new token costs one
// position, not the whole prefix: per attention layer the keys and values of
// every position seen so far, and the number of positions. One cache belongs
// to one chunk (model/gpt.hpp GPTChunk::decode) and one batch of sequences
// (a generation micro-batch). Value type; not thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>

namespace hp::model {

// One attention layer's cache: [batch, heads, positions, head_dim] each;
// undefined before the first call.
struct AttentionCache {
  at::Tensor keys;
  at::Tensor values;
};

struct KVCache {
  std::map<int, AttentionCache> layers;  // by global layer index
  std::int64_t positions = 0;            // positions cached so far
};

}  // namespace hp::model
