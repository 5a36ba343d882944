// MambaMixer: a Mamba-style selective state-space mixer (Gu & Dao, Mamba-1),
// [batch, seq, C] -> [batch, seq, C], causal:
//   x, z   = in_proj(u)                         (E = expand * C each)
//   x      = silu(causal depthwise conv1d(x))   (kernel K)
//   dt, B, Cs = x_proj(x)                       (R = ceil(C / 16), N, N)
//   dt     = softplus(dt_proj(dt))              ([.., E])
//   h_t    = exp(dt_t A) * h_{t-1} + dt_t B_t x_t,  y_t = h_t . Cs_t + D x_t
//   out    = out_proj(y * silu(z))
// with A = -exp(A_log) [E, N]: the state's decay depends on the input (the
// selection), so this is not an MLP under another name. The scan runs step by
// step through autograd (sequence lengths here are short).
//
// Parameters (local names): in_proj.weight [2E, C], conv1d.weight [E, K],
// conv1d.bias [E], x_proj.weight [R + 2N, E], dt_proj.weight [E, R],
// dt_proj.bias [E], A_log [E, N], D [E], out_proj.weight [C, E]. Values come
// from mamba_initial_value (by global name).
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "model/tensor_parallel.hpp"
#include "model/transformer_config.hpp"

namespace hp::model {

class Linear;
struct MambaCache;

struct MambaOptions {
  int state_size = 8;   // N
  int conv_kernel = 4;  // K
  int expand = 2;       // E = expand * C
};

// Under tensor parallelism (config.tensor_parallel) each rank holds inner /
// tp of the channels: in_proj (x and z parts each split) and dt_proj are
// column-parallel, x_proj and out_proj row-parallel, and the convolution,
// A_log and D split by channel (Megatron's Mamba mixer split).
class MambaMixer : public torch::nn::Module, public TensorParallelModule {
 public:
  MambaMixer(const TransformerConfig& config, const MambaOptions& options);
  // With a cache (decoding) u holds the positions after the cached ones: the
  // convolution reads the cached inputs before them, the scan starts from the
  // cached state, and both advance past u.
  torch::Tensor forward(const torch::Tensor& u, MambaCache* cache = nullptr);
  runtime::TensorShards own_shards() const override;

  torch::Tensor conv_weight, conv_bias, A_log, D;

 private:
  TensorParallel tp_;
  int64_t inner_, state_, rank_, kernel_;  // inner_: this rank's channels
  std::shared_ptr<ColumnParallelLinear> in_proj_, dt_proj_;
  std::shared_ptr<RowParallelLinear> x_proj_, out_proj_;
};

// The selective scan alone: x, dt [b, s, E], A [E, N], B, C [b, s, N], D [E]
// -> y [b, s, E] (exposed for tests against a naive loop). state (decoding):
// h [b, E, N] before the first step (zeros when undefined), replaced by h after the last.
torch::Tensor selective_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A,
                             const torch::Tensor& B, const torch::Tensor& C, const torch::Tensor& D,
                             torch::Tensor* state = nullptr);

// Mamba's own initial values for the parameter with this global name, or an
// undefined tensor when the name is not a Mamba-specific one: A_log = log(1..N)
// per channel (S4D-real), D = 1, dt_proj.bias = softplus^-1(dt) with dt
// log-uniform in [1e-3, 1e-1], drawn from config.seed ^ fnv1a64(name).
torch::Tensor mamba_initial_value(const std::string& name, at::IntArrayRef shape, const TransformerConfig& config);

}  // namespace hp::model
