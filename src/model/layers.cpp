#include "model/layers.hpp"

#include "model/emulated_device.hpp"
#include "model/fused_attention.hpp"
#include "model/fused_linear.hpp"
#include "model/hyper_connection.hpp"
#include "model/context_parallel.hpp"
#include "model/kv_cache.hpp"
#include "model/tensor_parallel.hpp"

#include <cmath>
#include <limits>

namespace hp::model {

c10::ScalarType to_scalar_type(DType d) {
  return d == DType::Float64 ? c10::kDouble : c10::kFloat;
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias,
               c10::ScalarType dtype) {
  const auto opts = at::TensorOptions().dtype(dtype);
  weight = register_parameter("weight", at::zeros({out_features, in_features}, opts));
  if (with_bias) bias = register_parameter("bias", at::zeros({out_features}, opts));
}

torch::Tensor Linear::forward(const torch::Tensor& x) { return fused_linear(x, weight, bias); }

LayerNorm::LayerNorm(int64_t dim, double eps, c10::ScalarType dtype) : dim_(dim), eps_(eps) {
  const auto opts = at::TensorOptions().dtype(dtype);
  weight = register_parameter("weight", at::ones({dim}, opts));
  bias = register_parameter("bias", at::zeros({dim}, opts));
}

torch::Tensor LayerNorm::forward(const torch::Tensor& x) {
  return at::layer_norm(x, {dim_}, weight, bias, eps_);
}

Embedding::Embedding(int64_t num, int64_t dim, c10::ScalarType dtype) {
  weight = register_parameter("weight", at::zeros({num, dim}, at::TensorOptions().dtype(dtype)));
}

torch::Tensor Embedding::forward(const torch::Tensor& ids) { return at::embedding(weight, ids); }

CausalSelfAttention::CausalSelfAttention(const TransformerConfig& config)
    : heads_(config.num_attention_heads / config.tensor_parallel.size),
      head_dim_(config.head_dim()),
      cp_(config.context_parallel) {
  const auto dtype = to_scalar_type(config.dtype);
  const int64_t hidden = config.hidden_size;
  const auto& tp = config.tensor_parallel;
  qkv_ = register_module("qkv", std::make_shared<ColumnParallelLinear>(hidden, 3 * hidden, true, dtype, tp, 3));
  proj_ = register_module("proj", std::make_shared<RowParallelLinear>(hidden, hidden, true, dtype, tp));
}

namespace {

// The additive form of a mask of positions a query must not see, with the
// dtype and device of `like`: 0 where it sees the key, -inf where it must not.
at::Tensor additive_mask(const at::Tensor& future, const at::Tensor& like) {
  return at::zeros(future.sizes(), like.options())
      .masked_fill_(future.to(like.device()), -std::numeric_limits<double>::infinity());
}

}  // namespace

const at::Tensor& CausalSelfAttention::causal_bias(int64_t seq, int64_t past, const at::Tensor& like) {
  if (!bias_.defined() || bias_.size(0) != seq || bias_.size(1) != past + seq ||
      bias_.scalar_type() != like.scalar_type() || bias_.device() != like.device()) {
    bias_ = additive_mask(at::ones({seq, past + seq}, at::TensorOptions().dtype(at::kBool)).triu(past + 1), like);
  }
  return bias_;
}

torch::Tensor CausalSelfAttention::forward(const torch::Tensor& x, AttentionCache* cache) {
  // Under sequence parallelism x holds this rank's share of the sequence and
  // qkv's input is the whole of it.
  const auto projected = qkv_->forward(x);
  if (!cache && cp_.size == 1 && fused_attention_supports(projected))
    return proj_->forward(fused_causal_attention(projected, heads_, head_dim_));
  const int64_t batch = projected.size(0), seq = projected.size(1);
  // [batch, seq, 3, heads, head_dim] -> [3, batch, heads, seq, head_dim]
  // unbind, not three selects: its backward stacks the three gradients into one
  // tensor, where each select's would fill a zero tensor of all three and add them.
  const auto qkv = projected.view({batch, seq, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4}).unbind(0);
  auto q = qkv[0], k = qkv[1], v = qkv[2];
  int64_t past = 0;
  if (cache) {
    if (cache->keys.defined()) {
      past = cache->keys.size(2);
      k = at::cat({cache->keys, k}, 2);
      v = at::cat({cache->values, v}, 2);
    }
    cache->keys = k;
    cache->values = v;
  }
  at::Tensor bias;  // additive_mask()
  if (cp_.size > 1) {
    if (cache) throw std::invalid_argument("context parallelism does not decode with a KV cache");
    // The keys and values of the whole sequence; this rank's queries at their global positions.
    k = gather_context_parallel(k, 2, cp_);
    v = gather_context_parallel(v, 2, cp_);
    const int64_t total = k.size(2);
    const auto keys = at::arange(total, at::TensorOptions().dtype(at::kLong));
    const auto future = keys.unsqueeze(0) > context_parallel_positions(total, cp_).unsqueeze(1);
    bias = additive_mask(future, q);
  } else {
    // Query i sits at position past + i: it sees keys 0 .. past + i.
    bias = causal_bias(seq, past, q);
  }
  // scores = q k^T / sqrt(head_dim) + bias as one batched product: the scale
  // and the mask cost no passes over the scores, forward or backward.
  const int64_t rows = batch * heads_, keys = k.size(2);
  const auto scores = at::baddbmm(bias, q.reshape({rows, seq, head_dim_}),
                                  k.reshape({rows, keys, head_dim_}).transpose(1, 2), 1.0,
                                  1.0 / std::sqrt(double(head_dim_)));
  const auto y = at::bmm(at::softmax(scores, -1), v.reshape({rows, keys, head_dim_}))
                     .view({batch, heads_, seq, head_dim_});
  return proj_->forward(y.transpose(1, 2).reshape({batch, seq, heads_ * head_dim_}));
}

MLP::MLP(const TransformerConfig& config) {
  const auto dtype = to_scalar_type(config.dtype);
  const auto& tp = config.tensor_parallel;
  fc1_ = register_module(
      "fc1", std::make_shared<ColumnParallelLinear>(config.hidden_size, config.ffn_hidden(), true, dtype, tp));
  fc2_ = register_module(
      "fc2", std::make_shared<RowParallelLinear>(config.ffn_hidden(), config.hidden_size, true, dtype, tp));
}

torch::Tensor MLP::forward(const torch::Tensor& x) {
  return fc2_->forward(at::gelu(fc1_->forward(x)));
}

TransformerBlock::TransformerBlock(const TransformerConfig& config) : emulate_(config.emulate) {
  // A tensor-parallel rank does its 1/tp share of the layer's work.
  emulate_.forward_ms /= config.tensor_parallel.size;
  emulate_.backward_ms /= config.tensor_parallel.size;
  if (emulate_.replace_math) return;  // the layer is its delay alone
  const auto dtype = to_scalar_type(config.dtype);
  attn_norm_ = register_module(
      "attn_norm", std::make_shared<LayerNorm>(config.hidden_size, config.layernorm_eps, dtype));
  attention_ = register_module("attention", std::make_shared<CausalSelfAttention>(config));
  mlp_norm_ = register_module(
      "mlp_norm", std::make_shared<LayerNorm>(config.hidden_size, config.layernorm_eps, dtype));
  mlp_ = register_module("mlp", std::make_shared<MLP>(config));
  if (config.enable_mhc_connections) {
    attention_hc_ = register_module("attention_hc", std::make_shared<HyperConnection>(config));
    mlp_hc_ = register_module("mlp_hc", std::make_shared<HyperConnection>(config));
  }
}

void TransformerBlock::set_mhc_recompute(bool on) {
  if (!attention_hc_) return;
  attention_hc_->set_recompute(on);
  mlp_hc_->set_recompute(on);
}

torch::Tensor TransformerBlock::forward(const torch::Tensor& x, AttentionCache* cache) {
  if (!emulate_.active()) return compute(x, cache);
  return emulated_delay(emulate_.replace_math ? x : compute(x, cache), emulate_.forward_ms, emulate_.backward_ms);
}

torch::Tensor TransformerBlock::compute(const torch::Tensor& x, AttentionCache* cache) {
  if (attention_hc_) {
    const auto h = attention_hc_->forward(x, [this, cache](const torch::Tensor& u) {
      return attention_->forward(attn_norm_->forward(u), cache);
    });
    return mlp_hc_->forward(h, [this](const torch::Tensor& u) { return mlp_->forward(mlp_norm_->forward(u)); });
  }
  const auto h = x + attention_->forward(attn_norm_->forward(x), cache);
  return h + mlp_->forward(mlp_norm_->forward(h));
}

}  // namespace hp::model
