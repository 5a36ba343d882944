#include "model/recompute.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <stdexcept>

namespace hp::model {
namespace {

struct RecomputeBackward : public torch::autograd::Node {
  RecomputeFn fn;
  std::vector<at::Tensor> inputs;  // detached: the values, not the graph
  std::vector<bool> needs_grad;
  std::vector<std::uint32_t> versions;  // of the inputs at the forward

  std::string name() const override { return "RecomputeBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (!fn) throw std::logic_error("recompute_in_backward: a second backward through the same recompute");
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i]._version() != versions[i])
        throw std::logic_error("recompute_in_backward: an input was modified in place after the forward");
    std::vector<at::Tensor> leaves;
    for (size_t i = 0; i < inputs.size(); ++i) leaves.push_back(inputs[i].detach().requires_grad_(needs_grad[i]));
    std::vector<at::Tensor> outs;
    {
      at::AutoGradMode on(true);
      outs = fn(leaves);
    }
    std::vector<at::Tensor> roots, root_grads;
    for (size_t j = 0; j < outs.size(); ++j) {
      if (!outs[j].requires_grad()) continue;
      roots.push_back(outs[j]);
      root_grads.push_back(j < grads.size() && grads[j].defined() ? grads[j] : at::zeros_like(outs[j]));
    }
    if (!roots.empty()) torch::autograd::backward(roots, root_grads);
    torch::autograd::variable_list result;
    for (auto& leaf : leaves) result.push_back(leaf.requires_grad() ? leaf.grad() : at::Tensor());
    inputs.clear();
    fn = nullptr;
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> recompute_in_backward(const RecomputeFn& fn, const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> outs;
  {
    at::NoGradGuard no_grad;
    outs = fn(inputs);
  }
  if (!at::GradMode::is_enabled()) return outs;
  auto node = std::shared_ptr<RecomputeBackward>(new RecomputeBackward(), torch::autograd::deleteNode);
  node->fn = fn;
  for (const auto& x : inputs) {
    node->inputs.push_back(x.detach());
    node->needs_grad.push_back(x.requires_grad());
    node->versions.push_back(x._version());
  }
  node->set_next_edges(torch::autograd::collect_next_edges(at::ArrayRef<at::Tensor>(inputs)));
  for (auto& o : outs) torch::autograd::set_history(o, node);
  return outs;
}

}  // namespace hp::model
