// Learning-rate schedule: linear warmup, then cosine decay to min_lr
// (Megatron's OptimizerParamScheduler with --lr-decay-style cosine).
//
// Step s counts optimizer steps already taken (0 for the first update), as
// Megatron's scheduler does:
//   s <= warmup_steps (warmup_steps > 0): warmup_init_lr + (max_lr - warmup_init_lr) * s / warmup_steps
//   s >= decay_steps:                     min_lr
//   otherwise:                            min_lr + (max_lr - min_lr) * 0.5 * (1 + cos(pi * r)),
//                                         r = (s - warmup_steps) / (decay_steps - warmup_steps)
// decay_steps counts from step 0 and includes the warmup (usually the run's total steps).
// Pure functions of their arguments; thread-safe.
#pragma once

#include <cstdint>

namespace hp::train {

struct LrScheduleOptions {
  double max_lr = 3e-4;          // --lr: peak learning rate, > 0
  double min_lr = 0.0;           // --min-lr: floor after the decay, in [0, --lr]
  double warmup_init_lr = 0.0;   // --lr-warmup-init: value at step 0 of the warmup, in [0, --lr]
  std::int64_t warmup_steps = 0; // --warmup-steps: >= 0
  std::int64_t decay_steps = 1;  // --decay-steps: >= 1 and >= --warmup-steps

  // Throws std::invalid_argument naming the flag and what is allowed.
  void validate() const;
};

// The learning rate of step s (s >= 0, else std::invalid_argument). Validates o.
double lr_at(const LrScheduleOptions& o, std::int64_t s);

}  // namespace hp::train
