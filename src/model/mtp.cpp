#include "model/mtp.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/moduledict.h>

#include <stdexcept>

#include "model/hyper_connection.hpp"
#include "model/layers.hpp"
#include "model/lm_loss.hpp"
#include "model/loss_injection.hpp"
#include "model/mhc_recompute.hpp"

namespace hp::model {
MultiTokenPrediction::MultiTokenPrediction(
    const TransformerConfig& config, const MtpOptions& options,
    const std::function<std::vector<MtpLayer>(int k)>& make_layers,
    const std::function<MtpLayer(int k)>& make_contraction)
    : config_(config), depth_(options.depth), loss_scaling_(options.loss_scaling), carry_streams_(options.carry_streams) {
  if (depth_ < 1) throw std::invalid_argument("model.mtp_depth must be >= 1, got " + std::to_string(depth_));
  if (carry_streams_ && !(config.enable_mhc_connections && make_contraction))
    throw std::logic_error("MTP carries streams only with mHC and a contraction per depth");
  const auto dtype = to_scalar_type(config.dtype);
  const int64_t c = config.hidden_size, n = config.mhc_num_residual_streams;
  for (int k = 1; k <= depth_; ++k) {
    auto m = register_module(std::to_string(k), std::make_shared<torch::nn::Module>());
    Depth d;
    d.hidden_norm = m->register_module("hidden_norm", std::make_shared<LayerNorm>(c, config.layernorm_eps, dtype));
    d.token_norm = m->register_module("token_norm", std::make_shared<LayerNorm>(c, config.layernorm_eps, dtype));
    if (carry_streams_) {
      d.e_proj = m->register_module("e_proj", std::make_shared<Linear>(c, c, false, dtype));
      d.h_proj = m->register_module("h_proj", std::make_shared<Linear>(c, c, false, dtype));
      d.final_norm = m->register_module("final_norm", std::make_shared<LayerNorm>(c, config.layernorm_eps, dtype));
    } else {
      d.proj = m->register_module("proj", std::make_shared<Linear>(2 * c, c, false, dtype));
    }
    auto layers = m->register_module("layers", torch::nn::ModuleDict());
    d.layers = make_layers(k);
    for (size_t j = 0; j < d.layers.size(); ++j) layers->update({{std::to_string(j), d.layers[j].module}});
    if (config.enable_mhc_connections) {
      if (make_contraction) {
        MtpLayer contraction = make_contraction(k);
        m->register_module("final_contraction", contraction.module);
        d.contract = contraction.forward;
      } else {
        d.contract = [n](const torch::Tensor& x) { return contract_streams_mean(x, n); };
      }
    }
    depths_.push_back(std::move(d));
  }
}

torch::Tensor MultiTokenPrediction::depth_input(Depth& d, const torch::Tensor& prev, const torch::Tensor& tokens,
                                                const Fn& embed) const {
  const int64_t len = tokens.size(1);
  const torch::Tensor e = d.token_norm->forward(embed(tokens));
  if (!carry_streams_)
    return d.proj->forward(at::cat({d.hidden_norm->forward(prev.narrow(1, 0, len)), e}, -1));
  // Each stream normalised on its own, projected, and given the projected embedding.
  const int64_t n = config_.mhc_num_residual_streams, c = config_.hidden_size;
  const torch::Tensor streams = prev.narrow(1, 0, len).reshape({prev.size(0), len, n, c});
  const torch::Tensor x = d.e_proj->forward(e).unsqueeze(-2) + d.h_proj->forward(d.hidden_norm->forward(streams));
  return x.reshape({prev.size(0), len, n * c});
}

MultiTokenPrediction::Losses MultiTokenPrediction::losses(const torch::Tensor& h, const torch::Tensor& target,
                                                          const Fn& embed, const Fn& head) {
  const int64_t seq = target.size(1);
  if (seq <= depth_)
    throw std::invalid_argument("multi-token prediction of depth " + std::to_string(depth_) +
                                " needs sequences longer than that, got " + std::to_string(seq));
  Losses out;
  torch::Tensor prev = h;
  torch::Tensor sum;
  for (int k = 1; k <= depth_; ++k) {
    Depth& d = depths_[k - 1];
    const int64_t len = seq - k;
    torch::Tensor x = depth_input(d, prev, target.narrow(1, k - 1, len), embed);  // x_{t+k}
    if (config_.enable_mhc_connections && !carry_streams_) x = expand_streams(x, config_.mhc_num_residual_streams);
    {
      MhcRecomputeScope groups(config_.mhc_recompute_layer_num, config_.recomputes_mhc());
      for (size_t j = 0; j < d.layers.size(); ++j) {
        x = d.layers[j].forward(x);
        groups.layer_done(x, j + 1 == d.layers.size());
      }
    }
    torch::Tensor y = x;
    if (config_.enable_mhc_connections) y = d.contract(x);
    if (carry_streams_) {
      y = d.final_norm->forward(y);
    } else {
      x = y;  // one stream carried
    }
    const auto loss = lm_loss(head(y), target.narrow(1, k, len), config_.tensor_parallel);
    out.per_depth.push_back(loss.detach());
    sum = sum.defined() ? sum + loss : loss;
    prev = x;
  }
  out.total = sum * (loss_scaling_ / depth_);
  // Summed where the losses are (no device round trip per micro-batch), in
  // double as the reports are; read once a step by take_mean_losses.
  const torch::Tensor these = at::stack(out.per_depth).to(at::kDouble);
  sums_ = sums_.defined() ? sums_ + these : these;
  ++calls_;
  return out;
}

std::vector<double> MultiTokenPrediction::take_mean_losses() {
  std::vector<double> out(depth_, 0.0);
  if (calls_ > 0) {
    const torch::Tensor mean = (sums_ / calls_).cpu().contiguous();
    const double* m = mean.data_ptr<double>();
    out.assign(m, m + depth_);
  }
  sums_ = torch::Tensor();
  calls_ = 0;
  return out;
}

std::vector<std::string> MultiTokenPrediction::metric_names(int depth) {
  std::vector<std::string> names;
  for (int k = 1; k <= depth; ++k) names.push_back("mtp_loss_" + std::to_string(k));
  return names;
}

}  // namespace hp::model
