#include "model/moe.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/moduledict.h>

#include <stdexcept>

#include "model/layers.hpp"
#include "model/loss_injection.hpp"

namespace hp::model {

MixtureOfExperts::MixtureOfExperts(const TransformerConfig& config, const MoEOptions& options) : options_(options) {
  if (options.num_experts < 1 || options.top_k < 1 || options.top_k > options.num_experts)
    throw std::invalid_argument("model.moe_top_k must be in 1..model.moe_num_experts (" +
                                std::to_string(options.num_experts) + "), got " + std::to_string(options.top_k));
  const auto dtype = to_scalar_type(config.dtype);
  router_ = register_module("router", std::make_shared<Linear>(config.hidden_size, options.num_experts, false, dtype));
  auto experts = register_module("experts", torch::nn::ModuleDict());
  for (int e = 0; e < options.num_experts; ++e) {
    experts_.push_back(std::make_shared<MLP>(config));
    experts->update({{std::to_string(e), experts_.back()}});
  }
}

MixtureOfExperts::Routing MixtureOfExperts::route(const torch::Tensor& tokens) {
  const auto logits = router_->forward(tokens);
  Routing r;
  r.probs = at::softmax(logits, -1);
  const auto top = logits.topk(options_.top_k, -1);
  r.experts = std::get<1>(top);
  r.weights = at::softmax(std::get<0>(top), -1);
  return r;
}

torch::Tensor MixtureOfExperts::expert(int e, const torch::Tensor& tokens) { return experts_.at(e)->forward(tokens); }

torch::Tensor MixtureOfExperts::forward(const torch::Tensor& u) {
  const auto tokens = u.reshape({-1, u.size(-1)});
  const Routing r = route(tokens);
  torch::Tensor out = at::zeros_like(tokens);
  const int64_t num_experts = options_.num_experts;
  for (int e = 0; e < num_experts; ++e) {
    const auto hit = r.experts.eq(e);  // [T, k]
    const auto rows = hit.any(-1).nonzero().squeeze(-1);
    if (rows.numel() == 0) continue;
    const auto weight = (r.weights * hit).sum(-1).index_select(0, rows).unsqueeze(-1);
    out = out.index_add(0, rows, expert(e, tokens.index_select(0, rows)) * weight);
  }
  // Load balancing: f_e counts assignments (no gradient), P_e carries it.
  const auto share = at::one_hot(r.experts, num_experts).sum(at::IntArrayRef{0, 1}).to(r.probs.scalar_type()) /
                     static_cast<double>(r.experts.numel());
  const auto aux = num_experts * (share * r.probs.mean(0)).sum() * options_.aux_loss_coeff;
  last_aux_loss_ = aux.detach();  // read only when asked: no device round trip per forward
  return inject_loss(out.reshape(u.sizes()), aux, options_.aux_loss_scale);
}

}  // namespace hp::model
