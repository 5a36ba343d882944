#include "runtime/stage.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <stdexcept>
#include <string>

namespace hp::runtime {
namespace {

const at::Tensor& find(const std::map<int, at::Tensor>& m, int micro, const char* what, int stage) {
  auto it = m.find(micro);
  if (it == m.end())
    throw std::logic_error("stage " + std::to_string(stage) + " has no " + what + " for micro " +
                           std::to_string(micro));
  return it->second;
}

}  // namespace

Stage::Stage(int index, bool last, Forward forward) : index_(index), last_(last), forward_(std::move(forward)) {}

at::Tensor Stage::forward(int micro, const MicroBatch& data, const at::Tensor& input) {
  if (outputs_.count(micro) || losses_.count(micro))
    throw std::logic_error("stage " + std::to_string(index_) + ": forward of micro " + std::to_string(micro) +
                           " ran twice in one step");
  at::Tensor x = input;
  if (at::isFloatingType(input.scalar_type())) x = input.detach().requires_grad_(input_requires_grad_);
  inputs_[micro] = x;
  at::Tensor out = forward_(x, data);
  if (!out.defined())
    throw std::logic_error("stage " + std::to_string(index_) + ": the forward of micro " + std::to_string(micro) +
                           " returned no tensor");
  outputs_[micro] = out;
  return out;
}

void Stage::set_loss(int micro, const at::Tensor& loss) { losses_[micro] = loss; }

void Stage::backward_input(int micro, const at::Tensor& grad_output) {
  if (deferred_.count(micro))
    throw std::logic_error("stage " + std::to_string(index_) + ": input backward of micro " + std::to_string(micro) +
                           " ran twice in one step");
  WeightGradWork& work = deferred_[micro];
  const DeferWeightGrads scope(&work);
  backward(micro, grad_output);
}

void Stage::backward_weight(int micro) {
  auto it = deferred_.find(micro);
  if (it == deferred_.end())
    throw std::logic_error("stage " + std::to_string(index_) + ": weight backward of micro " + std::to_string(micro) +
                           " before its input backward");
  for (auto& product : it->second) product();
  deferred_.erase(it);
}

void Stage::backward(int micro, const at::Tensor& grad_output) {
  if (last_) {
    torch::autograd::backward({find(losses_, micro, "loss", index_)});
    losses_.erase(micro);
  } else {
    if (!grad_output.defined())
      throw std::logic_error("stage " + std::to_string(index_) + ": backward of micro " + std::to_string(micro) +
                             " needs the output gradient");
    torch::autograd::backward({find(outputs_, micro, "output", index_)}, {grad_output});
  }
  outputs_.erase(micro);
  const at::Tensor& in = find(inputs_, micro, "input", index_);
  if (in.requires_grad()) input_grads_[micro] = in.grad();
  inputs_.erase(micro);
}

at::Tensor Stage::take_input_grad(int micro) {
  at::Tensor g = find(input_grads_, micro, "input gradient", index_);
  input_grads_.erase(micro);
  return g;
}
at::Tensor Stage::input(int micro) const { return find(inputs_, micro, "input", index_); }
at::Tensor Stage::output(int micro) const { return find(outputs_, micro, "output", index_); }

void Stage::pseudo_deallocate(int micro) {
  at::Tensor& out = outputs_.at(micro);
  out.set_data(at::empty({1}, out.options()));
}

void Stage::release(int micro) {
  inputs_.erase(micro);
  outputs_.erase(micro);
}

void Stage::reset() {
  inputs_.clear();
  outputs_.clear();
  losses_.clear();
  input_grads_.clear();
  deferred_.clear();
}

}  // namespace hp::runtime
