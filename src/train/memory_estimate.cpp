#include "train/memory_estimate.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

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

std::optional<double> available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024.0;
  return std::nullopt;
}

void check_memory_fits(const MemoryEstimate& estimate, int ranks, double available) {
  const double need = estimate.per_rank() * ranks;
  if (need <= available) return;
  throw std::invalid_argument("the model needs about " + estimate.describe() + ", " + gib(need) + " GiB for the " +
                              std::to_string(ranks) + " rank(s) on this machine, which has " + gib(available) +
                              " GiB available; use a smaller model (model.num_layers, model.hidden_size, model.vocab_size), fewer or "
                              "smaller micro-batches, more machines, or train.distributed_optimizer with train.dp");
}

}  // namespace hp::train
