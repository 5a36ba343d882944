#include "train/memory_estimate.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"

namespace hp::train {
namespace {

std::string gib(double bytes) {
  std::ostringstream os;
  os.precision(bytes >= 10.0 * (1 << 30) ? 0 : 2);
  os << std::fixed << bytes / static_cast<double>(1 << 30);
  return os.str();
}

}  // namespace

std::string MemoryEstimate::describe() const {
  return gib(per_rank()) + " GiB per rank (parameters " + gib(parameters) + ", gradients " + gib(gradients) +
         ", optimizer " + gib(optimizer) + ", activations " + gib(activations) + " GiB)";
}

MemoryEstimate estimate_memory(const std::vector<StageFootprint>& stages, const schedule::ScheduleOptions& layout,
                               double element_bytes, double replicated) {
  double largest = 0, stage_activations = 0;
  for (int r = 0; r < layout.pp; ++r) {
    double params = replicated;
    for (int c = 0; c < layout.vpp; ++c) params += stages.at(layout.stage_of(r, c)).parameters;
    largest = std::max(largest, params);
  }
  for (const auto& s : stages) stage_activations = std::max(stage_activations, s.activation_bytes);
  int peak = 0;
  for (const auto& rank : schedule::simulate(schedule::generate(layout), schedule::CostModel{}).ranks)
    peak = std::max(peak, rank.peak_activations);
  MemoryEstimate e;
  e.parameters = largest * element_bytes;
  e.gradients = e.parameters;
  e.optimizer = 2 * e.parameters;
  e.activations = peak * stage_activations;
  return e;
}

double transformer_layer_activation_bytes(double seq, double batch, double hidden, double heads, double streams,
                                          double tp, double element_bytes) {
  return seq * batch * hidden * (10 * streams + 24 / tp + 5 * heads * seq / (hidden * tp)) * element_bytes / 2;
}

std::optional<double> available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return std::nullopt;
}

void check_memory_fits(const MemoryEstimate& estimate, int ranks, double available, bool can_shard_optimizer) {
  const double need = estimate.per_rank() * ranks;
  if (need <= available) return;
  throw std::invalid_argument("the model needs about " + estimate.describe() + ", " + gib(need) + " GiB for the " +
                              std::to_string(ranks) + " rank(s) on this machine, which has " + gib(available) +
                              " GiB available; use a smaller model (" + estimate.sized_by + "), fewer or "
                              "smaller micro-batches" +
                              (can_shard_optimizer ? ", more machines, or train.distributed_optimizer with train.dp"
                                                   : " or more machines"));
}

}  // namespace hp::train
