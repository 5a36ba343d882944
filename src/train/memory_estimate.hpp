// MemoryEstimate: what one rank of a training job will hold, estimated before
// any rank starts, so that a model too large for the machine is refused in one
// line instead of being killed by the kernel minutes later (issue 11 part 8).
//
// Parameters, their gradients and AdamW's two moments are counted exactly (a
// Task knows its parameter count per rank); activations with Megatron-LM's
// estimate of what one layer keeps for backward, s b h (34 + 5 a s / h) bytes
// at 2 bytes an element (scaled to the model's), times the layers of a chunk
// and the most chunk activations the schedule holds at once
// (schedule::simulate's peak_activations).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hp::train {

struct MemoryEstimate {
  double parameters = 0;   // bytes of the largest rank's parameters
  double gradients = 0;
  double optimizer = 0;    // AdamW's exp_avg and exp_avg_sq
  double activations = 0;  // at the schedule's peak
  double per_rank() const { return parameters + gradients + optimizer + activations; }
  // "3.2 GiB per rank (parameters 0.8, gradients 0.8, optimizer 1.6, activations 0.1 GiB)"
  std::string describe() const;
};

// The bytes of memory the OS can still give (MemAvailable of /proc/meminfo),
// or nullopt where that is unknown.
std::optional<double> available_memory_bytes();

// Throws std::invalid_argument in one line when `ranks` ranks of this estimate
// do not fit in `available` bytes: the estimate, what the machine has, and what
// would help.
void check_memory_fits(const MemoryEstimate& estimate, int ranks, double available);

}  // namespace hp::train
