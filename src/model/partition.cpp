#include "model/partition.hpp"

#include <stdexcept>

namespace hp::model {

namespace {

[[noreturn]] void bad_partition(const std::string& msg) { throw std::invalid_argument(msg); }

void check_degrees(int pp, int vpp) {
  if (pp < 1) bad_partition("schedule.pp must be at least 1, got " + std::to_string(pp));
  if (vpp < 1) bad_partition("schedule.vpp must be at least 1, got " + std::to_string(vpp));
}

std::string stages_text(int pp, int vpp) {
  return std::to_string(pp * vpp) + " stages (schedule.pp " + std::to_string(pp) + " x schedule.vpp " +
         std::to_string(vpp) + ")";
}

}  // namespace

Partition::Partition(int pp, int vpp, std::vector<int> counts, schedule::Placement placement)
    : pp_(pp), vpp_(vpp), num_layers_(0), placement_(placement), counts_(std::move(counts)) {
  if (placement == schedule::Placement::V && vpp != 2)
    bad_partition("V placement holds two chunks per rank: schedule.vpp must be 2, got " + std::to_string(vpp));
  begins_.reserve(counts_.size() + 1);
  for (int c : counts_) {
    begins_.push_back(num_layers_);
    num_layers_ += c;
  }
  begins_.push_back(num_layers_);
}

Partition Partition::even(int num_layers, int pp, int vpp, schedule::Placement placement) {
  check_degrees(pp, vpp);
  if (num_layers < 1) bad_partition("model.num_layers must be a positive integer, got " + std::to_string(num_layers));
  const int stages = pp * vpp;
  if (num_layers < stages) {
    bad_partition("model.num_layers " + std::to_string(num_layers) + " cannot be split over " +
         stages_text(pp, vpp) + ": give at least " + std::to_string(stages) +
         " layers or per-stage counts (model.layers_per_stage)");
  }
  std::vector<int> counts(stages, num_layers / stages);
  for (int s = 0; s < num_layers % stages; ++s) ++counts[s];
  return Partition(pp, vpp, std::move(counts), placement);
}

Partition Partition::from_counts(int num_layers, int pp, int vpp, std::vector<int> counts,
                                 schedule::Placement placement) {
  check_degrees(pp, vpp);
  if (num_layers < 1) bad_partition("model.num_layers must be a positive integer, got " + std::to_string(num_layers));
  const int stages = pp * vpp;
  if (static_cast<int>(counts.size()) != stages) {
    bad_partition("model.layers_per_stage has " + std::to_string(counts.size()) + " counts but there are " +
         stages_text(pp, vpp) + ": give one count per stage, in global stage order");
  }
  long long sum = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    if (counts[s] < 0) {
      bad_partition("model.layers_per_stage: stage " + std::to_string(s) + " has " +
           std::to_string(counts[s]) + " layers; counts must be >= 0 (0 = empty stage)");
    }
    sum += counts[s];
  }
  if (sum != num_layers) {
    bad_partition("model.layers_per_stage sums to " + std::to_string(sum) + " but model.num_layers is " +
         std::to_string(num_layers) + ": the counts must add up to the number of layers");
  }
  return Partition(pp, vpp, std::move(counts), placement);
}

void Partition::check_stage(int stage) const {
  if (stage < 0 || stage >= num_stages()) {
    bad_partition("stage " + std::to_string(stage) + " is out of range: the partition has " +
         stages_text(pp_, vpp_) + ", numbered 0.." + std::to_string(num_stages() - 1));
  }
}

int Partition::stage(int rank, int chunk) const {
  if (rank < 0 || rank >= pp_) {
    bad_partition("rank " + std::to_string(rank) + " is out of range for schedule.pp " + std::to_string(pp_));
  }
  if (chunk < 0 || chunk >= vpp_) {
    bad_partition("chunk " + std::to_string(chunk) + " is out of range for schedule.vpp " + std::to_string(vpp_));
  }
  return schedule::placed_stage(placement_, pp_, rank, chunk);
}

int Partition::rank_of(int stage) const {
  check_stage(stage);
  return schedule::placed_rank(placement_, pp_, stage);
}

int Partition::chunk_of(int stage) const {
  check_stage(stage);
  return stage / pp_;
}

int Partition::begin(int stage) const {
  check_stage(stage);
  return begins_[stage];
}

int Partition::end(int stage) const {
  check_stage(stage);
  return begins_[stage + 1];
}

bool Partition::is_first(int stage) const {
  check_stage(stage);
  return stage == 0;
}

bool Partition::is_last(int stage) const {
  check_stage(stage);
  return stage == num_stages() - 1;
}

int Partition::stage_of_layer(int layer) const {
  if (layer < 0 || layer >= num_layers_) {
    bad_partition("layer " + std::to_string(layer) + " is out of range: model.num_layers is " +
         std::to_string(num_layers_));
  }
  for (int s = 0; s < num_stages(); ++s) {
    if (layer < begins_[s + 1]) return s;
  }
  return num_stages() - 1;  // unreachable: begins_.back() == num_layers_
}

std::string Partition::describe() const {
  std::string out = "pp=" + std::to_string(pp_) + " vpp=" + std::to_string(vpp_) + " layers=[";
  for (std::size_t s = 0; s < counts_.size(); ++s) {
    if (s) out += ",";
    out += std::to_string(counts_[s]);
  }
  return out + "]";
}

}  // namespace hp::model
