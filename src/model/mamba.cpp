#include "model/mamba.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "model/gpt.hpp"
#include "model/kv_cache.hpp"
#include "model/layers.hpp"

namespace hp::model {

MambaMixer::MambaMixer(const TransformerConfig& config, const MambaOptions& o)
    : tp_(config.tensor_parallel),
      inner_(static_cast<int64_t>(o.expand) * config.hidden_size / config.tensor_parallel.size),
      state_(o.state_size),
      rank_((config.hidden_size + 15) / 16),
      kernel_(o.conv_kernel) {
  const auto dtype = to_scalar_type(config.dtype);
  const auto opts = at::TensorOptions().dtype(dtype);
  const int64_t inner = inner_ * tp_.size, hidden = config.hidden_size;
  in_proj_ = register_module("in_proj", std::make_shared<ColumnParallelLinear>(hidden, 2 * inner, false, dtype, tp_, 2));
  auto conv = register_module("conv1d", std::make_shared<torch::nn::Module>("conv1d"));
  conv_weight = conv->register_parameter("weight", at::zeros({inner_, kernel_}, opts));
  conv_bias = conv->register_parameter("bias", at::zeros({inner_}, opts));
  x_proj_ = register_module("x_proj", std::make_shared<RowParallelLinear>(inner, rank_ + 2 * state_, false, dtype, tp_));
  dt_proj_ = register_module("dt_proj", std::make_shared<ColumnParallelLinear>(rank_, inner, true, dtype, tp_));
  A_log = register_parameter("A_log", at::zeros({inner_, state_}, opts));
  D = register_parameter("D", at::ones({inner_}, opts));
  out_proj_ = register_module("out_proj", std::make_shared<RowParallelLinear>(inner, hidden, false, dtype, tp_));
}

runtime::TensorShards MambaMixer::own_shards() const {
  if (tp_.size == 1) return {};
  return {{"conv1d.weight", {0, 1}}, {"conv1d.bias", {0, 1}}, {"A_log", {0, 1}}, {"D", {0, 1}}};
}

torch::Tensor MambaMixer::forward(const torch::Tensor& u, MambaCache* cache) {
  const int64_t seq = u.size(1);
  const auto xz = in_proj_->forward(u);
  torch::Tensor x = xz.narrow(-1, 0, inner_), z = xz.narrow(-1, inner_, inner_);
  if (cache) {
    // Causal depthwise convolution over the cached K - 1 inputs (zeros at the
    // sequence's start) and these.
    const auto before = cache->conv_inputs.defined() ? cache->conv_inputs
                                                     : at::zeros({u.size(0), kernel_ - 1, inner_}, x.options());
    const auto window = at::cat({before, x}, 1);
    cache->conv_inputs = window.narrow(1, seq, kernel_ - 1);
    const std::vector<int64_t> stride{1}, padding{0}, dilation{1};
    x = at::conv1d(window.transpose(1, 2), conv_weight.unsqueeze(1), conv_bias, stride, padding, dilation, inner_)
            .transpose(1, 2);
  } else {
    // Causal depthwise convolution: pad K - 1 steps on the left.
    x = at::conv1d(x.transpose(1, 2), conv_weight.unsqueeze(1), conv_bias, 1, kernel_ - 1, 1, inner_)
            .narrow(-1, 0, seq)
            .transpose(1, 2);
  }
  x = at::silu(x);
  // x_proj sums over the channels of every rank; each rank's B and C then
  // feed its own channels, so their gradients are summed back (dt_proj's
  // input does that itself).
  const auto dbc = x_proj_->forward(x);
  const auto dt = at::softplus(dt_proj_->forward(dbc.narrow(-1, 0, rank_)));
  const auto B = copy_to_tensor_parallel(dbc.narrow(-1, rank_, state_), tp_);
  const auto C = copy_to_tensor_parallel(dbc.narrow(-1, rank_ + state_, state_), tp_);
  const auto y = selective_scan(x, dt, -at::exp(A_log), B, C, D, cache ? &cache->state : nullptr);
  return out_proj_->forward(y * at::silu(z));
}

torch::Tensor selective_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A,
                             const torch::Tensor& B, const torch::Tensor& C, const torch::Tensor& D,
                             torch::Tensor* state) {
  const int64_t batch = x.size(0), seq = x.size(1), inner = x.size(2);
  torch::Tensor h = state && state->defined() ? *state : at::zeros({batch, inner, A.size(1)}, x.options());
  std::vector<torch::Tensor> ys;
  ys.reserve(seq);
  for (int64_t t = 0; t < seq; ++t) {
    const auto dt_t = dt.select(1, t).unsqueeze(-1);                    // [b, E, 1]
    const auto decay = at::exp(dt_t * A);                               // [b, E, N]
    const auto input = dt_t * B.select(1, t).unsqueeze(1) * x.select(1, t).unsqueeze(-1);
    h = decay * h + input;
    ys.push_back((h * C.select(1, t).unsqueeze(1)).sum(-1) + D * x.select(1, t));
  }
  if (state) *state = h;
  return at::stack(ys, 1);
}

torch::Tensor mamba_initial_value(const std::string& name, at::IntArrayRef shape, const TransformerConfig& config) {
  const auto dtype = to_scalar_type(config.dtype);
  if (name_ends_with(name, "mixer.A_log"))
    return at::log(at::arange(1, shape[1] + 1, at::kDouble)).repeat({shape[0], 1}).to(dtype);
  if (name_ends_with(name, "mixer.D")) return at::ones(shape, at::TensorOptions().dtype(dtype));
  if (name_ends_with(name, "mixer.dt_proj.bias")) {
    auto gen = at::detail::createCPUGenerator(config.seed ^ fnv1a64(name));
    const auto u = at::empty(shape, at::TensorOptions().dtype(at::kDouble)).uniform_(0, 1, gen);
    const auto dt = at::exp(u * (std::log(1e-1) - std::log(1e-3)) + std::log(1e-3));
    return (dt + at::log(-at::expm1(-dt))).to(dtype);  // softplus^-1
  }
  return {};
}

}  // namespace hp::model
