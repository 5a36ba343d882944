#include "model/hyper_connection.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "model/layers.hpp"
#include "model/recompute.hpp"

namespace hp::model {

HyperConnection::HyperConnection(const TransformerConfig& config)
    : config_(config),
      streams_(config.mhc_num_residual_streams),
      width_(config.hidden_size),
      sinkhorn_iterations_(config.mhc_sinkhorn_iterations) {
  const auto dtype = to_scalar_type(config.dtype);
  const int64_t n = streams_;
  mapping_proj_ = register_module("mapping_proj", std::make_shared<Linear>(n * width_, n * n + 2 * n, false, dtype));
  const auto opts = at::TensorOptions().dtype(dtype);
  alpha_pre = register_parameter("alpha_pre", at::zeros({1}, opts));
  alpha_post = register_parameter("alpha_post", at::zeros({1}, opts));
  alpha_res = register_parameter("alpha_res", at::zeros({1}, opts));
  bias = register_parameter("bias", at::zeros({n * n + 2 * n}, opts));
}

std::map<std::string, ParamInit> HyperConnection::own_inits() const {
  // As Megatron's _init_weights: the projection xavier-uniform, the gates the
  // gating factor (so H_res starts near 1/n everywhere), the bias zero.
  const auto dtype = to_scalar_type(config_.dtype);
  const ParamInit gate = constant_init(config_.mhc_init_gating_factor, dtype);
  return {{"mapping_proj.weight", xavier_uniform_init(config_.seed, dtype)},
          {"alpha_pre", gate},
          {"alpha_post", gate},
          {"alpha_res", gate},
          {"bias", constant_init(0.0, dtype)}};
}

HyperConnection::Mappings HyperConnection::mappings(const torch::Tensor& x) {
  const int64_t n = streams_;
  const double root = std::sqrt(static_cast<double>(n * width_));
  const torch::Tensor r = 1.0 / (x.norm(2, -1, /*keepdim=*/true) / root + 1e-6);
  const torch::Tensor alpha = at::cat({alpha_pre.expand({n}), alpha_post.expand({n}), alpha_res.expand({n * n})});
  const torch::Tensor h = r * mapping_proj_->forward(x) * alpha + bias;
  Mappings m;
  m.pre = at::sigmoid(h.narrow(-1, 0, n));
  m.post = 2.0 * at::sigmoid(h.narrow(-1, n, n));
  std::vector<int64_t> square = h.sizes().vec();
  square.back() = n;
  square.push_back(n);
  const torch::Tensor res = h.narrow(-1, 2 * n, n * n).reshape(square);
  m.res = sinkhorn_knopp(at::exp(res - std::get<0>(res.max(-1, /*keepdim=*/true))), sinkhorn_iterations_);
  return m;
}

torch::Tensor HyperConnection::forward(const torch::Tensor& x, const Sublayer& sublayer) {
  // x -> {H_pre @ x, H_post, H_res @ x}: everything but the sublayer.
  auto mix = [this](const std::vector<torch::Tensor>& in) -> std::vector<torch::Tensor> {
    const torch::Tensor& v = in[0];
    std::vector<int64_t> split = v.sizes().vec();
    split.back() = streams_;
    split.push_back(width_);
    const torch::Tensor xs = v.reshape(split);  // [..., n, C]
    const Mappings m = mappings(v);
    return {(m.pre.unsqueeze(-1) * xs).sum(-2), m.post, at::matmul(m.res, xs).reshape(v.sizes())};
  };
  const std::vector<torch::Tensor> mixed = recompute_ ? recompute_in_backward(mix, {x}) : mix({x});
  const torch::Tensor f = sublayer(mixed[0]);  // F(H_pre @ x): [..., C]
  // The sum comes last, so the result is a fresh tensor, not a view.
  return (mixed[1].unsqueeze(-1) * f.unsqueeze(-2)).reshape(x.sizes()) + mixed[2];
}

torch::Tensor sinkhorn_knopp(const torch::Tensor& m, int iterations) {
  torch::Tensor out = m;
  for (int i = 0; i < iterations; ++i) {
    out = out / out.sum(-1, /*keepdim=*/true).clamp_min(1e-6);
    out = out / out.sum(-2, /*keepdim=*/true).clamp_min(1e-6);
  }
  return out;
}

torch::Tensor expand_streams(const torch::Tensor& x, int64_t n) {
  std::vector<int64_t> times(x.dim(), 1);
  times.back() = n;
  return x.repeat(times);
}

torch::Tensor contract_streams_mean(const torch::Tensor& x, int64_t n) {
  std::vector<int64_t> split = x.sizes().vec();
  const int64_t width = split.back() / n;
  split.back() = n;
  split.push_back(width);
  return x.reshape(split).mean(-2);
}

}  // namespace hp::model
