// AdamW over named parameters, numerically identical to torch::optim::AdamW
// (LibTorch 1.13) and torch.optim.AdamW: decoupled weight decay
// p *= 1 - lr * weight_decay, then the bias-corrected Adam update
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
//
// State (exp_avg, exp_avg_sq and the step t of each parameter) is keyed by the
// parameter's GLOBAL name, so a checkpoint saved under one pipeline layout
// loads into another (train/checkpoint.hpp).
//
// Weight-decay rule (no_decay_bias_and_1d, on by default): Megatron-LM's
// (megatron/core/optimizer, _get_param_groups): a bias (its name ends in
// "bias") and every one-dimensional parameter (norms' weights, mHC's alphas,
// Mamba's A_log and D) get no weight decay; every other parameter gets
// options.weight_decay. Turn the option off for plain torch semantics (decay
// everything).
//
// One flat buffer per dtype holds the gradients and each of exp_avg and
// exp_avg_sq, as Megatron's contiguous gradient buffer does: when every
// parameter of a dtype has a gradient and the same step count, the update is
// a dozen operations over each piece of the flat buffers (kPieceElements) and
// a decay and an add per parameter (an add per piece it spans), not a dozen
// per parameter, with bitwise the same result; a parameter that is not contiguous has a buffer of its own. A step
// moves a gradient that is not yet in the buffer into it and points the
// parameter's .grad() there; autograd then accumulates into it in place. The
// parameters stay where they are (tied copies share their storage).
//
// Contract: single-threaded; step() and zero_grad() touch the live parameter
// tensors given to the constructor, which must outlive the optimizer (they are
// handles, so keeping the module alive is enough). Parameters are visited in
// name order. The state's tensors are views of the optimizer's buffers, valid
// while it lives.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "train/named_params.hpp"

namespace hp::train {

struct AdamWOptions {
  double beta1 = 0.9;                  // --adam-beta1, in [0, 1)
  double beta2 = 0.999;                // --adam-beta2, in [0, 1)
  double eps = 1e-8;                   // --adam-eps, > 0
  double weight_decay = 0.01;          // --weight-decay, >= 0
  bool no_decay_bias_and_1d = true;    // see the weight-decay rule above

  // Throws std::invalid_argument naming the flag and the allowed range.
  void validate() const;
};

// The no-decay rule for a parameter of this name and number of dimensions:
// its name ends with "bias", or it has one dimension.
bool is_no_decay(const std::string& name, std::int64_t dim);

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
  // The whole-buffer update runs in pieces of this many elements (1 MiB of floats).
  static constexpr std::int64_t kPieceElements = std::int64_t{1} << 18;

  // Throws std::invalid_argument for bad options or an undefined parameter tensor.
  explicit AdamW(NamedParams params, AdamWOptions options = {});

  // One update with learning rate lr (>= 0, finite: "--lr") from the current
  // .grad() of every parameter; parameters whose grad is undefined are
  // skipped (no decay, no state change), as torch does.
  void step(double lr);

  // Zeroes every defined grad in place (LibTorch 1.13 semantics: it stays defined).
  void zero_grad();

  // Whether the parameter of this name gets weight decay (the rule above).
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
  struct Slot {
    std::string name;
    at::Tensor param;
    at::Tensor grad, exp_avg, exp_avg_sq;  // views of the Flat's buffers
    std::int64_t offset = 0;
    bool decays = false;  // decays(name), fixed by the parameter and the options
  };
  struct Flat {  // the parameters of one dtype and device
    at::Tensor grads, exp_avg, exp_avg_sq;
    std::vector<Slot> slots;  // name order
  };

  // The whole-buffer update; false (and nothing done) unless every slot that
  // trains (requires a gradient) has one, and all have the same step count.
  bool step_flat(Flat& f, double lr);
  void step_one(Slot& s, double lr);

  NamedParams params_;
  AdamWOptions options_;
  AdamWState state_;
  std::vector<Flat> flats_;
};

}  // namespace hp::train
