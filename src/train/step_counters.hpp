// What each rank counts in one training step for --metrics, and the job's
// record of them: the sums over the ranks, and the values kept per rank.
//
// Contract: gather_step_counters is collective over `pg` (every rank passes
// as many model values, in the same order); it fills `m` on every rank.
#pragma once

#include <string>
#include <vector>

#include "train/metrics.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::train {

struct RankStepCounters {
  double bytes_sent = 0, bytes_received = 0;  // the pipeline's messages
  double optimizer_state_bytes = 0;
  double peak_bytes = 0;    // tensor bytes at the step's peak
  double bytes_loaded = 0;  // the data this rank read
  // RankModel::metrics, each this rank's share, so the sum over ranks is the value.
  std::vector<double> model_values;
};

// Into m.extra: bytes_sent, bytes_received, optimizer_state_bytes (summed
// over the ranks) and each model value under its name; into m.per_rank:
// peak_bytes and bytes_loaded.
void gather_step_counters(const RankStepCounters& mine, const std::vector<std::string>& model_names,
                          comm::ProcessGroup* pg, StepMetrics& m);

}  // namespace hp::train
