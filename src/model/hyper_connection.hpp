// HyperConnection: manifold-constrained hyper-connections (mHC, arXiv
// 2512.24880, on Hyper-Connections, arXiv 2409.19606) around one sublayer F,
// as Megatron-LM's hyper_connection.py computes them.
//
// The residual x carries n streams of width C, laid out stream-major in the
// last dimension: [..., n * C], stream j at [j*C, (j+1)*C). Per token:
//   r = 1 / (||x|| / sqrt(nC) + 1e-6)
//   h = r * mapping_proj(x) * alpha + bias   columns: pre (n), post (n), res (n^2)
//   H_pre = sigmoid(h_pre), H_post = 2 sigmoid(h_post),
//   H_res = SinkhornKnopp(exp(h_res - rowmax))        (n x n, doubly stochastic)
//   x_next = H_post^T * F(H_pre @ x) + H_res @ x
// alpha is one gate per column group (alpha_pre, alpha_post, alpha_res), each
// initialised to mhc_init_gating_factor, so at init H_res is close to 1/n in
// every entry (not the identity) and H_pre, H_post close to 1/2 and 1.
//
// Parameters (local names; the GPT's blocks register them as "<sublayer>_hc",
// the Hybrid layer as "hc"), each declaring how it starts (param_init.hpp):
// mapping_proj.weight [n^2 + 2n, nC] xavier-uniform, alpha_pre, alpha_post,
// alpha_res [1] mhc_init_gating_factor, bias [n^2 + 2n] zeros.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <memory>

#include "model/param_init.hpp"
#include "model/transformer_config.hpp"

namespace hp::model {

class Linear;

class HyperConnection : public torch::nn::Module, public DeclaresInit {
 public:
  using Sublayer = std::function<torch::Tensor(const torch::Tensor&)>;

  // n = config.mhc_num_residual_streams streams of config.hidden_size.
  explicit HyperConnection(const TransformerConfig& config);

  // x [..., n * C]; sublayer maps [..., C] -> [..., C]. Returns a new tensor
  // of x's shape.
  torch::Tensor forward(const torch::Tensor& x, const Sublayer& sublayer);

  struct Mappings {
    torch::Tensor pre;   // [..., n]
    torch::Tensor post;  // [..., n]
    torch::Tensor res;   // [..., n, n]
  };
  Mappings mappings(const torch::Tensor& x);

  // Selective mHC recompute (Megatron's): Sinkhorn keeps only its input, and
  // within the current recompute group (model/mhc_recompute.hpp) the
  // aggregation and the merge are recomputed in backward and their outputs
  // released until then; the sublayer's own graph is kept. Off by default.
  void set_recompute(bool on) { recompute_ = on; }

  torch::Tensor alpha_pre, alpha_post, alpha_res, bias;
  std::map<std::string, ParamInit> own_inits() const override;

 private:
  TransformerConfig config_;
  int64_t streams_;
  int64_t width_;
  int sinkhorn_iterations_;
  bool recompute_ = false;
  std::shared_ptr<Linear> mapping_proj_;
};

// Alternating row then column normalisation of a positive matrix [..., n, n],
// `iterations` passes, each divisor clamped at 1e-6.
torch::Tensor sinkhorn_knopp(const torch::Tensor& m, int iterations);

// [..., C] -> [..., n * C]: n copies of the hidden state, as a new tensor
// (never a view, so a stage that sends it can pseudo-deallocate it).
torch::Tensor expand_streams(const torch::Tensor& x, int64_t n);
// [..., n * C] -> [..., C]: the mean over the streams (GPT's contraction).
torch::Tensor contract_streams_mean(const torch::Tensor& x, int64_t n);

}  // namespace hp::model
