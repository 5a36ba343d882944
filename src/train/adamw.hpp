// AdamW over named parameters, numerically identical to torch::optim::AdamW
// (LibTorch 1.13) and torch.optim.AdamW: decoupled weight decay
// p *= 1 - lr * weight_decay, then the bias-corrected Adam update
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
//
// State (exp_avg, exp_avg_sq and the step t of each parameter) is keyed by the
// parameter's GLOBAL name, so a checkpoint saved under one pipeline layout
// loads into another (train/checkpoint.hpp).
//
// Weight-decay rule (no_decay_bias_and_norm, on by default as in GPT/Megatron
// training): a parameter whose name ends in "bias" or contains "norm"
// ("layers.3.attn_norm.weight", "final_norm.bias", "layers.0.mlp.fc1.bias") gets
// no weight decay; every other parameter gets options.weight_decay. Turn the
// option off for plain torch semantics (decay everything).
//
// Contract: single-threaded; step() and zero_grad() touch the live parameter
// tensors given to the constructor, which must outlive the optimizer (they are
// handles, so keeping the module alive is enough). Parameters are visited in
// name order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

#include "train/named_params.hpp"

namespace hp::train {

struct AdamWOptions {
  double beta1 = 0.9;                  // --adam-beta1, in [0, 1)
  double beta2 = 0.999;                // --adam-beta2, in [0, 1)
  double eps = 1e-8;                   // --adam-eps, > 0
  double weight_decay = 0.01;          // --weight-decay, >= 0
  bool no_decay_bias_and_norm = true;  // see the weight-decay rule above

  // Throws std::invalid_argument naming the flag and the allowed range.
  void validate() const;
};

// The no-decay name rule: ends with "bias" or contains "norm".
bool is_no_decay_name(const std::string& name);

struct AdamWParamState {
  at::Tensor exp_avg;     // same shape, dtype and device as the parameter
  at::Tensor exp_avg_sq;
  std::int64_t step = 0;  // updates this parameter has received (>= 1 when the tensors are set)
};

struct AdamWState {
  std::int64_t step = 0;                          // calls of AdamW::step()
  std::map<std::string, AdamWParamState> params;  // only parameters that were ever updated
};

class AdamW {
 public:
  // Throws std::invalid_argument for bad options or an undefined parameter tensor.
  explicit AdamW(NamedParams params, AdamWOptions options = {});

  // One update with learning rate lr (>= 0, finite: "--lr") from the current
  // .grad() of every parameter; parameters whose grad is undefined are
  // skipped (no decay, no state change), as torch does.
  void step(double lr);

  // Zeroes every defined grad in place (LibTorch 1.13 semantics: it stays defined).
  void zero_grad();

  // Whether the parameter gets weight decay (the rule above applied to the name).
  bool decays(const std::string& name) const;

  const AdamWOptions& options() const { return options_; }
  const NamedParams& params() const { return params_; }
  std::int64_t step_count() const { return state_.step; }
  const AdamWState& state() const { return state_; }

  // Replaces the state (e.g. from a checkpoint). Every name must be one of
  // this optimizer's parameters with a matching shape; tensors are copied to
  // the parameter's dtype and device. Names without an entry start fresh.
  // Throws std::invalid_argument naming the parameter otherwise.
  void load_state(const AdamWState& state);

 private:
  NamedParams params_;
  AdamWOptions options_;
  AdamWState state_;
};

}  // namespace hp::train
