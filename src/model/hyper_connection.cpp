#include "model/hyper_connection.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "model/layers.hpp"
#include "model/mhc_recompute.hpp"
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
  const torch::Tensor logits = at::exp(res - std::get<0>(res.max(-1, /*keepdim=*/true)));
  if (recompute_ && at::GradMode::is_enabled()) {
    // Only the input kept; the iterations again in backward (Megatron's SinkhornKnopp function).
    const int iterations = sinkhorn_iterations_;
    m.res = recompute_in_backward(
        [iterations](const std::vector<torch::Tensor>& in) -> std::vector<torch::Tensor> {
          return {sinkhorn_knopp(in[0], iterations)};
        },
        {logits})[0];
  } else {
    m.res = sinkhorn_knopp(logits, sinkhorn_iterations_);
  }
  return m;
}

torch::Tensor HyperConnection::forward(const torch::Tensor& x, const Sublayer& sublayer) {
  std::vector<int64_t> split = x.sizes().vec();
  split.back() = streams_;
  split.push_back(width_);
  // a = H_pre @ x, and x' = H_res @ x + H_post^T F(a); the sum comes last, so
  // the result is a fresh tensor, not a view.
  auto aggregate = [split](const std::vector<torch::Tensor>& in) -> std::vector<torch::Tensor> {
    return {(in[1].unsqueeze(-1) * in[0].reshape(split)).sum(-2)};
  };
  auto merge = [split](const std::vector<torch::Tensor>& in) -> std::vector<torch::Tensor> {
    const torch::Tensor &res = in[0], &v = in[1], &post = in[2], &f = in[3];
    return {(post.unsqueeze(-1) * f.unsqueeze(-2)).reshape(v.sizes()) + at::matmul(res, v.reshape(split)).reshape(v.sizes())};
  };
  const Mappings m = mappings(x);
  MhcRecomputeGroup* group = recompute_ ? current_mhc_recompute_group() : nullptr;
  if (!group) return merge({m.res, x, m.post, sublayer(aggregate({x, m.pre})[0])})[0];
  // In a recompute group: both run without a graph and again in backward, and
  // their outputs are released when the group ends (model/mhc_recompute.hpp).
  const torch::Tensor a = recompute_in_backward(aggregate, {x, m.pre})[0];
  group->release_later(a, [aggregate, in = std::vector<torch::Tensor>{x.detach(), m.pre.detach()}] { return aggregate(in)[0]; });
  const torch::Tensor f = sublayer(a);  // F(H_pre @ x): [..., C]
  const std::vector<torch::Tensor> merge_in = {m.res, x, m.post, f};
  const torch::Tensor out = recompute_in_backward(merge, merge_in)[0];
  std::vector<torch::Tensor> kept;
  for (const auto& t : merge_in) kept.push_back(t.detach());
  group->release_later(out, [merge, kept] { return merge(kept)[0]; });
  return out;
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
