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
#include <vector>

namespace hp::schedule {
struct ScheduleOptions;
}

namespace hp::train {

struct MemoryEstimate {
  double parameters = 0;   // bytes of the largest rank's parameters
  double gradients = 0;
  double optimizer = 0;    // AdamW's exp_avg and exp_avg_sq
  double activations = 0;  // at the schedule's peak
  // The options that size the model, named in a refusal.
  std::string sized_by = "model.num_layers, model.hidden_size, model.vocab_size";
  double per_rank() const { return parameters + gradients + optimizer + activations; }
  // "3.2 GiB per rank (parameters 0.8, gradients 0.8, optimizer 1.6, activations 0.1 GiB)"
  std::string describe() const;
};

// What one global stage holds on its rank: its parameters (elements of
// this rank's tensor-parallel share) and the bytes of activations one
// micro-batch of it keeps for backward.
struct StageFootprint {
  double parameters = 0;
  double activation_bytes = 0;
};

// The largest rank of `layout`: its stages' parameters (plus `replicated`
// elements every rank holds, MPipe's preprocess replicas), as many
// gradients, AdamW's two moments, and activations at the schedule's peak
// count of held micro-batches (simulated at unit costs) times the largest
// stage's. `stages` is indexed by global stage.
MemoryEstimate estimate_memory(const std::vector<StageFootprint>& stages, const schedule::ScheduleOptions& layout,
                               double element_bytes, double replicated = 0);

// Parameter elements of one tp rank's share of a causal self-attention
// (qkv and output projections with biases) and of an MLP (two linears with
// biases), as model/layers.hpp builds them.
inline double attention_parameters(double hidden, double tp) { return (4 * hidden * hidden + 4 * hidden) / tp; }
inline double mlp_parameters(double hidden, double ffn, double tp) { return (2 * hidden * ffn + ffn + hidden) / tp; }

// Megatron-LM's bytes one transformer layer keeps for backward, s b h (34 +
// 5 a s / h) at 2 bytes an element, scaled to `element_bytes`, with tensor
// parallelism and `streams` residual streams: s b h (10 n + 24 / tp + 5 a s / (h tp)).
double transformer_layer_activation_bytes(double seq, double batch, double hidden, double heads, double streams,
                                          double tp, double element_bytes);

// The bytes of memory the OS can still give (MemAvailable of /proc/meminfo),
// or nullopt where that is unknown.
std::optional<double> available_memory_bytes();

// Throws std::invalid_argument in one line when `ranks` ranks of this estimate
// do not fit in `available` bytes: the estimate, what the machine has, and what
// would help (train.distributed_optimizer too where the command has it).
void check_memory_fits(const MemoryEstimate& estimate, int ranks, double available, bool can_shard_optimizer = true);

}  // namespace hp::train
