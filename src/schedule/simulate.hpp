// Discrete-event cost model of a Schedule. Compute occupies its rank; a send
// is posted without blocking and its data reaches the receiver after
// latency + bytes / bandwidth; a receive waits for that arrival; collectives
// start when the last rank arrives. Around the pipeline, tensor parallelism's
// all-reduces occupy the rank inside each forward and backward, and data
// parallelism averages each stage's gradients after its last backward, in
// buckets that overlap the compute still to run (runtime/grad_reducer.hpp).
// Deterministic; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::schedule {

// A ring all-reduce of `bytes` over `ranks` ranks: latency + 2 (ranks - 1) /
// ranks * bytes / bw; 0 over one rank; bw 0 is infinite.
double all_reduce_time(double bytes, int ranks, double latency, double bw);

// All-reduces a forward or a backward runs inside itself (Megatron's tensor
// parallel mappings): `calls` of `bytes` in all.
struct Collectives {
  int calls = 0;
  double bytes = 0.0;
};

struct StageCost {
  StageCost(double forward = 1.0, double backward = 2.0, double input = -1.0, double weight = -1.0)
      : f(forward), b(backward), i(input), w(weight) {}
  double f = 1.0;  // compute, without the tp all-reduces
  double b = 2.0;
  // The split backward (BWD_I, BWD_W); < 0: half of b each.
  double i = -1.0;
  double w = -1.0;
  double input_backward() const { return i >= 0 ? i : b / 2; }
  double weight_backward() const { return w >= 0 ? w : b / 2; }
  Collectives tp_f, tp_b;   // over the tp group, inside one forward / backward
  double grad_bytes = 0.0;  // this rank's share of the stage's gradients (averaged over dp)
};

// Costs in arbitrary time units (the CLI calls them ms); bandwidths in bytes
// per time unit (0 = infinite).
struct CostModel {
  double f = 1.0;  // forward of one stage (chunk) for one micro-batch
  double b = 2.0;  // backward of one stage for one micro-batch
  // Its input and weight parts when a schedule splits it (BWD_I, BWD_W);
  // < 0: half of b each.
  double i = -1.0;
  double w = -1.0;
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
  // Tensor parallelism: each stage's tp_f / tp_b all-reduces over tp ranks.
  int tp = 1;
  double tp_latency = 0.0;
  double tp_bw = 0.0;
  // Data parallelism: each stage's grad_bytes all-reduced over dp replicas once
  // a step, in buckets of at most bucket_bytes that become ready evenly through
  // the stage's last backward and are reduced one after another; the
  // preprocess's pre_grad_bytes (MPipe's rest phase) at the end of the step.
  int dp = 1;
  double dp_latency = 0.0;
  double dp_bw = 0.0;
  double bucket_bytes = 25.0 * (1 << 20);
  double pre_grad_bytes = 0.0;

  StageCost stage(int s) const;
  // The time of the tp all-reduces `c` (one forward's or backward's of a stage).
  double tp_time(const Collectives& c) const;
  // Stage s's forward and backward, each with its tp all-reduces. The
  // backward's all-reduces carry its input's gradient, so its input part
  // (BWD_I) runs them and its weight part (BWD_W) none.
  double forward_time(int s) const;
  double backward_time(int s) const;
  double input_backward_time(int s) const;
  double weight_backward_time(int s) const;
  // Every cost finite and >= 0 (recompute: any finite value; < 0 means pre_f;
  // tp, dp >= 1; bucket_bytes > 0). Throws std::invalid_argument naming the
  // field (costs.f, costs.p2p_bw, ...).
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
  int peak_activations = 0;  // max forwards whose backward (B, or W) has not run yet (forward-only: 1)
  // Of those, the most at once whose input backward (I) has run: what a
  // split backward holds for its W (the weight products' inputs).
  int peak_awaiting_weight = 0;
  double compute_end = 0.0;    // when its last action ends
  double grad_sync_end = 0.0;  // when its last gradient bucket is averaged (0 without dp)
  std::vector<TimedAction> timeline;
};

// The activations a rank holds as its computes run, counted alike by the
// simulator and by a measured trace (train/measured_trace): a forward adds
// one, its backward (B, or a split backward's W) frees it, and between its I
// and its W it also awaits its weights. count() raises rr's peaks.
struct ActivationCount {
  int active = 0;
  int awaiting_weight = 0;
  void count(ActionType t, RankReport& rr);
};

struct SimulationReport {
  double step_time = 0.0;  // the latest compute_end or grad_sync_end
  double bubble_fraction = 0.0;  // sum(idle) / (pp * step_time)
  std::vector<RankReport> ranks;
  // The simulator's own work: each time it resumes a rank, plus each step a
  // rank takes (one per action, and one where it parks to wait). At most
  // 3 x actions + 2 x ranks: a rank resumes again only for a message or a
  // collective it waits for. An operation count for complexity tests, which
  // load cannot skew; bench_schedule measures the speed.
  std::int64_t operations = 0;
};

// Throws std::invalid_argument when the schedule cannot run (call validate first
// for a precise message).
// Validates the costs first (CostModel::validate).
SimulationReport simulate(const Schedule& s, const CostModel& costs);

// The time `rank` spends in actions of `type` in the simulated step.
double time_in(const SimulationReport& report, int rank, ActionType type);

}  // namespace hp::schedule
