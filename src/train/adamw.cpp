#include "train/adamw.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace hp::train {
namespace {

[[noreturn]] void bad_adamw(const std::string& msg) { throw std::invalid_argument(msg); }

std::string sizes_text(at::IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

void require_range01(const char* flag, double v) {
  if (!(v >= 0.0 && v < 1.0)) {
    std::ostringstream os;
    os << flag << " must be in [0, 1), got " << v;
    bad_adamw(os.str());
  }
}

}  // namespace

void AdamWOptions::validate() const {
  require_range01("train.adam.beta1", beta1);
  require_range01("train.adam.beta2", beta2);
  if (!(eps > 0.0 && std::isfinite(eps))) {
    std::ostringstream os;
    os << "train.adam.eps must be a finite number > 0, got " << eps;
    bad_adamw(os.str());
  }
  if (!(weight_decay >= 0.0 && std::isfinite(weight_decay))) {
    std::ostringstream os;
    os << "train.adam.weight_decay must be a finite number >= 0, got " << weight_decay;
    bad_adamw(os.str());
  }
}

bool is_no_decay(const std::string& name, std::int64_t dim) {
  static const std::string bias = "bias";
  const bool ends_bias =
      name.size() >= bias.size() && name.compare(name.size() - bias.size(), bias.size(), bias) == 0;
  return ends_bias || dim == 1;
}

AdamW::AdamW(NamedParams params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  options_.validate();
  for (const auto& [name, p] : params_) {
    if (!p.defined()) bad_adamw("AdamW: parameter " + name + " is an undefined tensor");
    // A parameter that cannot be viewed flat gets a buffer of its own, updated whole.
    auto f = !p.is_contiguous() ? flats_.end() : std::find_if(flats_.begin(), flats_.end(), [&](const Flat& x) {
      const at::Tensor& first = x.slots.front().param;
      return first.is_contiguous() && first.scalar_type() == p.scalar_type() && first.device() == p.device();
    });
    if (f == flats_.end()) f = flats_.insert(flats_.end(), Flat{});
    const std::int64_t offset = f->slots.empty() ? 0 : f->slots.back().offset + f->slots.back().param.numel();
    f->slots.push_back(Slot{name, p, {}, {}, {}, offset, decays(name)});
  }
  for (Flat& f : flats_) {
    const Slot& last = f.slots.back();
    const auto opts = last.param.options().requires_grad(false);
    for (at::Tensor* t : {&f.grads, &f.exp_avg, &f.exp_avg_sq}) *t = at::zeros({last.offset + last.param.numel()}, opts);
    for (Slot& s : f.slots) {
      auto view = [&](const at::Tensor& t) { return t.narrow(0, s.offset, s.param.numel()).view(s.param.sizes()); };
      s.grad = view(f.grads);
      s.exp_avg = view(f.exp_avg);
      s.exp_avg_sq = view(f.exp_avg_sq);
    }
  }
}

bool AdamW::decays(const std::string& name) const {
  return options_.weight_decay != 0.0 && !(options_.no_decay_bias_and_1d && is_no_decay(name, params_.at(name).dim()));
}

void AdamW::step(double lr) {
  if (!(lr >= 0.0 && std::isfinite(lr))) {
    std::ostringstream os;
    os << "train.lr.max_lr must be a finite number >= 0, got " << lr;
    bad_adamw(os.str());
  }
  at::NoGradGuard no_grad;
  for (Flat& f : flats_) {
    for (Slot& s : f.slots) {
      const at::Tensor& grad = s.param.grad();
      if (!grad.defined() || grad.is_same(s.grad)) continue;
      if (grad.is_sparse()) bad_adamw("AdamW: parameter " + s.name + " has a sparse gradient (not supported)");
      s.grad.copy_(grad);
      s.param.mutable_grad() = s.grad;
    }
    if (!step_flat(f, lr))
      for (Slot& s : f.slots) step_one(s, lr);
  }
  state_.step += 1;
}

namespace {

// Updates the moments in place and returns what the parameter adds: the same
// operations as torch::optim::AdamW::step(), whose p.addcdiv_(m, d, -step_size)
// computes p + (-step_size * m) / d elementwise.
at::Tensor adam_delta(const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, std::int64_t step,
                      double lr, const AdamWOptions& o) {
  const double bias_correction1 = 1 - std::pow(o.beta1, step);
  const double bias_correction2 = 1 - std::pow(o.beta2, step);
  exp_avg.mul_(o.beta1).add_(grad, 1 - o.beta1);
  exp_avg_sq.mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);
  const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(o.eps);
  return exp_avg.mul(-lr / bias_correction1).div_(denom);
}

}  // namespace

bool AdamW::step_flat(Flat& f, double lr) {
  std::int64_t step = -1;
  for (const Slot& s : f.slots) {
    if (!s.param.grad().defined()) {
      if (s.param.requires_grad()) return false;
      continue;  // frozen: its share of the buffers stays zero, and so does its delta
    }
    const auto it = state_.params.find(s.name);
    const std::int64_t t = it == state_.params.end() ? 0 : it->second.step;
    if (step >= 0 && t != step) return false;
    step = t;
  }
  if (step < 0) return true;  // nothing to update
  step += 1;
  for (Slot& s : f.slots)
    if (s.param.grad().defined() && s.decays) s.param.mul_(1 - lr * options_.weight_decay);
  // In pieces: the update's temporaries (the denominator and the delta) then stay small
  // whatever the model's size. Whole-buffer ones of over 32 MiB (8.4M float
  // parameters) are above glibc's largest mmap threshold: every step mapped them afresh and
  // paid a page fault for each 4 KiB, which made one step of 10M parameters 400 ms, not 20.
  const std::int64_t total = f.grads.numel();
  const std::int64_t piece = f.slots.front().param.is_contiguous() ? kPieceElements : total;
  auto slot = f.slots.begin();
  for (std::int64_t begin = 0; begin < total; begin += piece) {
    const std::int64_t end = std::min(total, begin + piece);
    at::Tensor exp_avg = f.exp_avg.slice(0, begin, end), exp_avg_sq = f.exp_avg_sq.slice(0, begin, end);
    const at::Tensor delta = adam_delta(f.grads.slice(0, begin, end), exp_avg, exp_avg_sq, step, lr, options_);
    // The slots this piece covers, in offset order: each adds its share of the delta.
    for (; slot != f.slots.end() && slot->offset < end; ++slot) {
      const std::int64_t lo = std::max(begin, slot->offset), hi = std::min(end, slot->offset + slot->param.numel());
      if (slot->param.grad().defined()) {
        const at::Tensor share = delta.slice(0, lo - begin, hi - begin);
        if (hi - lo == slot->param.numel())
          slot->param.add_(share.view(slot->param.sizes()));
        else
          slot->param.view({-1}).slice(0, lo - slot->offset, hi - slot->offset).add_(share);
      }
      if (hi < slot->offset + slot->param.numel()) break;  // it goes on in the next piece
    }
  }
  for (const Slot& s : f.slots)
    if (s.param.grad().defined()) state_.params[s.name] = AdamWParamState{s.exp_avg, s.exp_avg_sq, step};
  return true;
}

void AdamW::step_one(Slot& s, double lr) {
  if (!s.param.grad().defined()) return;
  if (s.decays) s.param.mul_(1 - lr * options_.weight_decay);
  auto& st = state_.params[s.name];
  st.exp_avg = s.exp_avg;
  st.exp_avg_sq = s.exp_avg_sq;
  st.step += 1;
  s.param.add_(adam_delta(s.param.grad(), st.exp_avg, st.exp_avg_sq, st.step, lr, options_));
}

void AdamW::zero_grad() {
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

void AdamW::load_state(const AdamWState& state) {
  if (state.step < 0) bad_adamw("AdamW state: negative step count " + std::to_string(state.step));
  for (const auto& [name, st] : state.params) {
    auto it = params_.find(name);
    if (it == params_.end()) bad_adamw("AdamW state: " + name + " is not a parameter of this optimizer");
    const at::Tensor& p = it->second;
    if (!st.exp_avg.defined() || !st.exp_avg_sq.defined())
      bad_adamw("AdamW state for " + name + ": exp_avg and exp_avg_sq must both be set");
    for (const at::Tensor* t : {&st.exp_avg, &st.exp_avg_sq}) {
      if (!t->sizes().equals(p.sizes()))
        bad_adamw("AdamW state for " + name + ": shape " + sizes_text(t->sizes()) + " but the parameter is " +
             sizes_text(p.sizes()));
    }
    if (st.step < 1) bad_adamw("AdamW state for " + name + ": step must be >= 1, got " + std::to_string(st.step));
  }
  // Checked whole before any buffer changes; the state may be a view of them.
  at::NoGradGuard no_grad;
  AdamWState next;
  next.step = state.step;
  for (Flat& f : flats_) {
    for (Slot& s : f.slots) {
      const auto it = state.params.find(s.name);
      if (it == state.params.end()) {
        s.exp_avg.zero_();
        s.exp_avg_sq.zero_();
        continue;
      }
      if (!it->second.exp_avg.is_same(s.exp_avg)) s.exp_avg.copy_(it->second.exp_avg.detach());
      if (!it->second.exp_avg_sq.is_same(s.exp_avg_sq)) s.exp_avg_sq.copy_(it->second.exp_avg_sq.detach());
      next.params.emplace(s.name, AdamWParamState{s.exp_avg, s.exp_avg_sq, it->second.step});
    }
  }
  state_ = std::move(next);
}

}  // namespace hp::train
