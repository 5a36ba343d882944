#include "train/lr_schedule.hpp"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace hp::train {
namespace {

template <typename... Ts>
[[noreturn]] void fail(const Ts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw std::invalid_argument(os.str());
}

}  // namespace

void LrScheduleOptions::validate() const {
  if (!(max_lr > 0.0 && std::isfinite(max_lr))) fail("train.lr.max_lr must be a finite number > 0, got ", max_lr);
  if (!(min_lr >= 0.0 && min_lr <= max_lr))
    fail("train.lr.min_lr must be in [0, train.lr.max_lr = ", max_lr, "], got ", min_lr);
  if (!(warmup_init_lr >= 0.0 && warmup_init_lr <= max_lr))
    fail("train.lr.warmup_init_lr must be in [0, train.lr.max_lr = ", max_lr, "], got ", warmup_init_lr);
  if (warmup_steps < 0) fail("train.lr.warmup_steps must be >= 0, got ", warmup_steps);
  if (decay_steps < 1) fail("train.lr.decay_steps must be >= 1, got ", decay_steps);
  if (decay_steps < warmup_steps)
    fail("train.lr.warmup_steps (", warmup_steps, ") must be <= train.lr.decay_steps (", decay_steps,
         "): the decay steps include the warmup");
}

double lr_at(const LrScheduleOptions& o, std::int64_t s) {
  o.validate();
  if (s < 0) fail("learning-rate schedule: step must be >= 0, got ", s);
  if (o.warmup_steps > 0 && s <= o.warmup_steps) {
    return o.warmup_init_lr +
           (o.max_lr - o.warmup_init_lr) * static_cast<double>(s) / static_cast<double>(o.warmup_steps);
  }
  if (s >= o.decay_steps) return o.min_lr;
  const double ratio = static_cast<double>(s - o.warmup_steps) / static_cast<double>(o.decay_steps - o.warmup_steps);
  const double coeff = 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return o.min_lr + coeff * (o.max_lr - o.min_lr);
}

}  // namespace hp::train
