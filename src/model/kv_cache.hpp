// KVCache: what a decoder keeps between calls so that a new token costs one
// position, not the whole prefix: per attention layer the keys and values of
// every position seen so far, per Mamba mixer its recurrent state (the scan's
// state and the convolution's last inputs), and the number of positions. One cache belongs
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

// One Mamba mixer's state after the positions seen so far (model/mamba.hpp);
// undefined before the first call.
struct MambaCache {
  at::Tensor conv_inputs;  // [batch, kernel - 1, channels]: the last inputs of the causal convolution
  at::Tensor state;        // [batch, channels, state size]: the selective scan's h
};

struct KVCache {
  std::map<int, AttentionCache> layers;  // by global layer index
  std::map<int, MambaCache> mamba;       // by global layer index
  std::int64_t positions = 0;            // positions cached so far
};

}  // namespace hp::model
