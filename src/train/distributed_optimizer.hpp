// DistributedOptimizer: AdamW whose state is sharded over a group (ZeRO-1,
// Megatron's --use-distributed-optimizer). The group is the ranks that hold
// the same parameters with the same gradients after the step's reduction
// (the data-parallel replicas, and the context-parallel ranks): every
// parameter has one owner there, which alone keeps its AdamW state and
// updates it; then each owner broadcasts its new values. Parameters are dealt
// out in name order to the least loaded member (by elements), the same on
// every member.
//
// Contract: step() and full_state() are collective over the group; members
// pass the same names and shapes. Without a group (or one of one rank) it is
// plain AdamW. Single-threaded, like AdamW.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "train/adamw.hpp"
#include "train/named_params.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::train {

class DistributedOptimizer {
 public:
  DistributedOptimizer(const NamedParams& params, const AdamWOptions& options, comm::ProcessGroup* group);

  // The AdamW update of the owned parameters, then every parameter's new
  // value from its owner.
  void step(double lr);
  // Every parameter's state (for a checkpoint): the owners broadcast theirs.
  AdamWState full_state();
  // Keeps the owned parameters' part of a whole state (from a checkpoint).
  void load_state(const AdamWState& whole);
  // Bytes of the AdamW state this rank keeps.
  std::int64_t state_bytes() const;

 private:
  comm::ProcessGroup* group_;
  NamedParams params_;
  std::vector<std::vector<std::string>> owned_;  // by member rank, in name order
  AdamW adam_;                                   // over this rank's owned parameters
};

}  // namespace hp::train
