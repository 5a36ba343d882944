#include "model/mtp.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/moduledict.h>

#include <stdexcept>

#include "model/hyper_connection.hpp"
#include "model/layers.hpp"
#include "model/lm_loss.hpp"
#include "model/loss_injection.hpp"

namespace hp::model {
MultiTokenPrediction::MultiTokenPrediction(
    const TransformerConfig& config, int depth, double loss_scaling,
    const std::function<std::vector<MtpLayer>(int k)>& make_layers,
    const std::function<MtpLayer(int k)>& make_contraction)
    : config_(config), depth_(depth), loss_scaling_(loss_scaling) {
  if (depth < 1) throw std::invalid_argument("model.mtp_depth must be >= 1, got " + std::to_string(depth));
  const auto dtype = to_scalar_type(config.dtype);
  const int64_t c = config.hidden_size, n = config.mhc_num_residual_streams;
  for (int k = 1; k <= depth; ++k) {
    auto m = register_module(std::to_string(k), std::make_shared<torch::nn::Module>());
    Depth d;
    d.hidden_norm = m->register_module("hidden_norm", std::make_shared<LayerNorm>(c, config.layernorm_eps, dtype));
    d.token_norm = m->register_module("token_norm", std::make_shared<LayerNorm>(c, config.layernorm_eps, dtype));
    d.proj = m->register_module("proj", std::make_shared<Linear>(2 * c, c, false, dtype));
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
    const auto tokens = target.narrow(1, k - 1, len);  // x_{t+k}
    torch::Tensor x = d.proj->forward(at::cat(
        {d.hidden_norm->forward(prev.narrow(1, 0, len)), d.token_norm->forward(embed(tokens))}, -1));
    if (config_.enable_mhc_connections) x = expand_streams(x, config_.mhc_num_residual_streams);
    for (auto& layer : d.layers) x = layer.forward(x);
    if (config_.enable_mhc_connections) x = d.contract(x);
    const auto loss = lm_loss(head(x), target.narrow(1, k, len), config_.tensor_parallel);
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
