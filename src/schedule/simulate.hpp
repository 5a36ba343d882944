// Discrete-event cost model of a Schedule. Compute occupies its rank; a send
// is posted without blocking and its data reaches the receiver after
// latency + bytes / bandwidth; a receive waits for that arrival; collectives
// start when the last rank arrives. Deterministic; thread-compatible.
#pragma once

#include <map>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::schedule {

struct StageCost {
  double f = 1.0;
  double b = 2.0;
};

// Costs in arbitrary time units (the CLI calls them ms); bandwidths in bytes
// per time unit (0 = infinite).
struct CostModel {
  double f = 1.0;  // forward of one stage (chunk) for one micro-batch
  double b = 2.0;  // backward of one stage for one micro-batch
  std::map<int, StageCost> per_stage;  // overrides by global stage index
  // Preprocess (MPipe's first T layers). In non-MPipe schedules its forward and
  // backward are part of F(0, m) and B(0, m).
  double pre_f = 0.0;
  double pre_b = 0.0;
  double recompute = -1.0;  // forward recompute in MPIPE_TRANSPOSE_BWD; < 0 = pre_f
  double broadcast_bytes = 0.0;   // preprocess parameter bytes (MPIPE_PARAM_BROADCAST)
  double broadcast_bw = 0.0;
  double p2p_latency = 0.0;
  double p2p_bw = 0.0;
  double activation_bytes = 0.0;  // one activation / gradient message
  double preprocess_input_bytes = 0.0;  // MPIPE_GRAPH_SEND message

  StageCost stage(int s) const;
  // Every cost finite and >= 0 (recompute: any finite value; < 0 means pre_f).
  // Throws std::invalid_argument naming the field (costs.f, costs.p2p_bw, ...).
  void validate() const;
};

struct TimedAction {
  Action action;
  double start = 0.0;
  double end = 0.0;
};

struct RankReport {
  double busy = 0.0;   // time spent computing (F, B, preprocess, collectives' transfer)
  double idle = 0.0;   // step_time - busy
  int peak_activations = 0;  // max forwards whose backward has not run yet (forward-only: 1)
  std::vector<TimedAction> timeline;
};

struct SimulationReport {
  double step_time = 0.0;
  double bubble_fraction = 0.0;  // sum(idle) / (pp * step_time)
  std::vector<RankReport> ranks;
};

// Throws std::invalid_argument when the schedule cannot run (call validate first
// for a precise message).
// Validates the costs first (CostModel::validate).
SimulationReport simulate(const Schedule& s, const CostModel& costs);

// The time `rank` spends in actions of `type` in the simulated step.
double time_in(const SimulationReport& report, int rank, ActionType type);

}  // namespace hp::schedule
