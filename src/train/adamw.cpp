#include "train/adamw.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace hp::train {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument(msg); }

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

void require_range01(const char* flag, double v) {
  if (!(v >= 0.0 && v < 1.0)) {
    std::ostringstream os;
    os << flag << " must be in [0, 1), got " << v;
    fail(os.str());
  }
}

}  // namespace

void AdamWOptions::validate() const {
  require_range01("--adam-beta1", beta1);
  require_range01("--adam-beta2", beta2);
  if (!(eps > 0.0 && std::isfinite(eps))) {
    std::ostringstream os;
    os << "--adam-eps must be a finite number > 0, got " << eps;
    fail(os.str());
  }
  if (!(weight_decay >= 0.0 && std::isfinite(weight_decay))) {
    std::ostringstream os;
    os << "--weight-decay must be a finite number >= 0, got " << weight_decay;
    fail(os.str());
  }
}

bool is_no_decay_name(const std::string& name) {
  static const std::string bias = "bias";
  const bool ends_bias =
      name.size() >= bias.size() && name.compare(name.size() - bias.size(), bias.size(), bias) == 0;
  return ends_bias || name.find("norm") != std::string::npos;
}

AdamW::AdamW(NamedParams params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  options_.validate();
  for (const auto& [name, p] : params_) {
    if (!p.defined()) fail("AdamW: parameter " + name + " is an undefined tensor");
  }
}

bool AdamW::decays(const std::string& name) const {
  return options_.weight_decay != 0.0 && !(options_.no_decay_bias_and_norm && is_no_decay_name(name));
}

void AdamW::step(double lr) {
  if (!(lr >= 0.0 && std::isfinite(lr))) {
    std::ostringstream os;
    os << "--lr must be a finite number >= 0, got " << lr;
    fail(os.str());
  }
  at::NoGradGuard no_grad;
  const double beta1 = options_.beta1;
  const double beta2 = options_.beta2;
  for (auto& [name, p] : params_) {
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    if (grad.is_sparse()) fail("AdamW: parameter " + name + " has a sparse gradient (not supported)");
    // The same operations, in the same order, as torch::optim::AdamW::step().
    if (decays(name)) p.mul_(1 - lr * options_.weight_decay);
    auto& st = state_.params[name];
    if (!st.exp_avg.defined()) {
      st.step = 0;
      st.exp_avg = at::zeros_like(p, at::MemoryFormat::Preserve);
      st.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Preserve);
    }
    st.step += 1;
    const double bias_correction1 = 1 - std::pow(beta1, st.step);
    const double bias_correction2 = 1 - std::pow(beta2, st.step);
    st.exp_avg.mul_(beta1).add_(grad, 1 - beta1);
    st.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
    const at::Tensor denom = (st.exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(options_.eps);
    const double step_size = lr / bias_correction1;
    p.addcdiv_(st.exp_avg, denom, -step_size);
  }
  state_.step += 1;
}

void AdamW::zero_grad() {
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

void AdamW::load_state(const AdamWState& state) {
  if (state.step < 0) fail("AdamW state: negative step count " + std::to_string(state.step));
  AdamWState next;
  next.step = state.step;
  for (const auto& [name, st] : state.params) {
    auto it = params_.find(name);
    if (it == params_.end()) fail("AdamW state: " + name + " is not a parameter of this optimizer");
    const at::Tensor& p = it->second;
    if (!st.exp_avg.defined() || !st.exp_avg_sq.defined())
      fail("AdamW state for " + name + ": exp_avg and exp_avg_sq must both be set");
    for (const at::Tensor* t : {&st.exp_avg, &st.exp_avg_sq}) {
      if (!t->sizes().equals(p.sizes()))
        fail("AdamW state for " + name + ": shape " + shape_str(t->sizes()) + " but the parameter is " +
             shape_str(p.sizes()));
    }
    if (st.step < 1) fail("AdamW state for " + name + ": step must be >= 1, got " + std::to_string(st.step));
    AdamWParamState copy;
    copy.step = st.step;
    copy.exp_avg = st.exp_avg.detach().to(p.options(), /*non_blocking=*/false, /*copy=*/true);
    copy.exp_avg_sq = st.exp_avg_sq.detach().to(p.options(), /*non_blocking=*/false, /*copy=*/true);
    next.params.emplace(name, std::move(copy));
  }
  state_ = std::move(next);
}

}  // namespace hp::train
