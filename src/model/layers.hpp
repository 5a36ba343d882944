// Transformer building blocks as LibTorch modules, batch-first ([batch, seq, ...]).
//
// Parameters are registered under short local names ("weight", "qkv", ...), so a
// block registered as "layers" / "7" has global names like
// "layers.7.attention.qkv.weight". Construction creates parameters with a
// fixed placeholder value (zeros; ones for LayerNorm weights) and never touches
// the global RNG; the owning model sets the real initial values by global name
// (see initial_parameter_value in gpt.hpp). No dropout: runs are deterministic.
#pragma once

#include <torch/nn/module.h>

#include "model/transformer_config.hpp"

namespace hp::model {

c10::ScalarType to_scalar_type(DType d);

// y = x W^T (+ b). weight [out, in], bias [out].
class Linear : public torch::nn::Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool with_bias, c10::ScalarType dtype);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;
  torch::Tensor bias;  // undefined when with_bias is false
};

// LayerNorm over the last dimension with elementwise affine weight and bias.
class LayerNorm : public torch::nn::Module {
 public:
  LayerNorm(int64_t dim, double eps, c10::ScalarType dtype);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;
  torch::Tensor bias;

 private:
  int64_t dim_;
  double eps_;
};

// Lookup table: weight [num, dim]; forward(int64 ids [...]) -> [..., dim].
class Embedding : public torch::nn::Module {
 public:
  Embedding(int64_t num, int64_t dim, c10::ScalarType dtype);
  torch::Tensor forward(const torch::Tensor& ids);

  torch::Tensor weight;
};

struct AttentionCache;
class ColumnParallelLinear;
class RowParallelLinear;

// Causal multi-head self-attention: fused "qkv" projection [hidden -> 3*hidden],
// softmax(q k^T / sqrt(head_dim)) with future positions masked, "proj" output
// projection. [batch, seq, hidden] -> [batch, seq, hidden]; any seq length.
// Under tensor parallelism (config.tensor_parallel) each rank runs heads / tp
// heads: qkv is column-parallel (its q, k and v parts each split), proj
// row-parallel (model/tensor_parallel.hpp). Under context parallelism x holds
// this rank's positions (model/context_parallel.hpp) and attention reads the
// keys and values of the whole sequence.
// With a cache (decoding) x holds the positions after the cached ones: they
// attend to the cached keys and values and to each other causally, and the
// cache grows by them. Without a cache or context parallelism, on CPU, the
// attention between the two projections is one fused operation
// (model/fused_attention.hpp).
class CausalSelfAttention : public torch::nn::Module {
 public:
  explicit CausalSelfAttention(const TransformerConfig& config);
  torch::Tensor forward(const torch::Tensor& x, AttentionCache* cache = nullptr);

 private:
  // The additive causal mask of seq queries after past cached positions, in
  // like's dtype and device, kept for the next call of the same shape.
  const at::Tensor& causal_bias(int64_t seq, int64_t past, const at::Tensor& like);

  at::Tensor bias_;
  int64_t heads_;  // this rank's
  int64_t head_dim_;
  ContextParallel cp_;
  std::shared_ptr<ColumnParallelLinear> qkv_;
  std::shared_ptr<RowParallelLinear> proj_;
};

// "fc1" [hidden -> ffn_hidden], exact GELU, "fc2" [ffn_hidden -> hidden];
// fc1 column-parallel and fc2 row-parallel under tensor parallelism.
class MLP : public torch::nn::Module {
 public:
  explicit MLP(const TransformerConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  std::shared_ptr<ColumnParallelLinear> fc1_;
  std::shared_ptr<RowParallelLinear> fc2_;
};

class HyperConnection;

// Pre-norm block: x + attention(attn_norm(x)), then h + mlp(mlp_norm(h)).
// Submodules: attn_norm, attention, mlp_norm, mlp. With mHC
// (config.enable_mhc_connections) x carries n streams, [batch, seq, n * hidden],
// and each residual is a HyperConnection ("attention_hc", "mlp_hc") around the
// same sublayer. Returns a new tensor (never a view of its input). With
// config.emulate the block also takes (or with replace_math only takes, and
// has no submodules) the emulated layer's time.
class TransformerBlock : public torch::nn::Module {
 public:
  explicit TransformerBlock(const TransformerConfig& config);
  // cache: the attention's (decoding; see CausalSelfAttention).
  torch::Tensor forward(const torch::Tensor& x, AttentionCache* cache = nullptr);
  // Selective mHC recompute of both hyper-connections (no-op without mHC).
  void set_mhc_recompute(bool on);

 private:
  torch::Tensor compute(const torch::Tensor& x, AttentionCache* cache);

  EmulatedLayer emulate_;
  std::shared_ptr<LayerNorm> attn_norm_;
  std::shared_ptr<CausalSelfAttention> attention_;
  std::shared_ptr<LayerNorm> mlp_norm_;
  std::shared_ptr<MLP> mlp_;
  std::shared_ptr<HyperConnection> attention_hc_, mlp_hc_;  // mHC only
};

}  // namespace hp::model
