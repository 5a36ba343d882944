// Partition: which transformer layers each pipeline stage holds.
//
// num_layers consecutive layers are split over pp * vpp stages, numbered
// globally in the schedule's placement (schedule.hpp: loop, stage s = chunk *
// pp + rank, or V), so a stage holds the same layers under either placement.
// Stage s holds the half-open global layer range [begin(s), end(s)); ranges are
// consecutive in stage order and cover [0, num_layers). Stage 0 additionally
// holds the embedding, the last stage (pp * vpp - 1) the final norm and head.
// Free of LibTorch.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::model {

class Partition {
 public:
  // Even split: layers / stages each, the remainder one extra to the first
  // stages. Requires num_layers >= pp * vpp (every stage gets a layer); use
  // from_counts for empty stages. Throws std::invalid_argument naming
  // model.num_layers / schedule.pp / schedule.vpp.
  static Partition even(int num_layers, int pp, int vpp = 1,
                        schedule::Placement placement = schedule::Placement::Loop);

  // Explicit per-stage counts, indexed by global stage (pp * vpp of them, each
  // >= 0, zeros make empty stages, summing to num_layers). Throws
  // std::invalid_argument naming model.layers_per_stage.
  static Partition from_counts(int num_layers, int pp, int vpp, std::vector<int> counts,
                               schedule::Placement placement = schedule::Placement::Loop);

  int pp() const { return pp_; }
  int vpp() const { return vpp_; }
  int num_stages() const { return pp_ * vpp_; }
  int num_layers() const { return num_layers_; }
  schedule::Placement placement() const { return placement_; }

  // Global stage <-> (rank, chunk). Arguments out of range throw std::invalid_argument.
  int stage(int rank, int chunk) const;
  int rank_of(int stage) const;
  int chunk_of(int stage) const;

  int begin(int stage) const;  // first global layer of the stage
  int end(int stage) const;    // one past its last layer (== begin for an empty stage)
  int count(int stage) const { return end(stage) - begin(stage); }
  bool is_first(int stage) const;  // stage 0: holds the embedding
  bool is_last(int stage) const;   // stage pp*vpp-1: holds the final norm and LM head

  // The stage holding a global layer (the stage with begin <= layer < end).
  int stage_of_layer(int layer) const;

  // Per-stage layer counts, indexed by global stage.
  const std::vector<int>& counts() const { return counts_; }

  // "pp=2 vpp=2 layers=[2,2,2,2]", for logs and error messages.
  std::string describe() const;

  friend bool operator==(const Partition& a, const Partition& b) {
    return a.pp_ == b.pp_ && a.vpp_ == b.vpp_ && a.counts_ == b.counts_;
  }
  friend bool operator!=(const Partition& a, const Partition& b) { return !(a == b); }

 private:
  Partition(int pp, int vpp, std::vector<int> counts, schedule::Placement placement);
  void check_stage(int stage) const;

  int pp_;
  int vpp_;
  int num_layers_;
  schedule::Placement placement_;
  std::vector<int> counts_;  // per stage
  std::vector<int> begins_;  // per stage, plus num_layers_ at the end
};

}  // namespace hp::model
