// Calibration: what the simulator needs of each stage, timed on this
// machine. Each stage is timed by the rank that holds it on one micro-batch
// (forward, backward, and the backward split into its input and weight parts
// as a zero-bubble schedule runs it), with the tensor-parallel all-reduces
// made inside counted and their time taken out (the simulator prices those
// itself); the pipeline group's sum is every stage's.
//
// Contract: calibrate_rank is collective over `tp` (its ranks hold the same
// stages) and sum_over over `group`; both leave gradients behind, which the
// caller zeroes.
#pragma once

#include <vector>

#include "runtime/microbatch.hpp"
#include "runtime/rank_model.hpp"
#include "schedule/simulate.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::bench {

struct StageCalibration {
  double f = 0, b = 0;          // forward and backward compute, ms (tp all-reduces taken out)
  schedule::Collectives tp_f;   // the tensor-parallel all-reduces inside the forward
  schedule::Collectives tp_b;   // ... and the backward
  double grad_bytes = 0;        // the stage's gradients on one rank
  double i = 0, w = 0;          // the split backward's input and weight parts (split layouts only)
};

struct Calibration {
  std::vector<StageCalibration> stages;     // by global stage; zero where another rank measures
  double pre_f = 0, pre_b = 0;              // MPipe's preprocess (measured by stage 0's rank)
  double pre_grad_bytes = 0;
};

// This rank's stages timed on `micro`: the median of `reps` runs after a
// warm-up run, each on its own, so a run descheduled by another process is
// not priced into every action. Under MPipe stage 0 starts from the
// preprocess output; a later stage from random data of its input's shape.
Calibration calibrate_rank(const runtime::RankModel& model, const runtime::MicroBatch& micro, int stages, int reps,
                           comm::ProcessGroup* tp, bool split);

// Every stage's calibration: the sum over the pipeline group (null: this rank's).
Calibration sum_over(const Calibration& mine, comm::ProcessGroup* group);

// The simulator's prices of compute (communication is priced by the caller).
schedule::CostModel cost_model(const Calibration& c, bool split);

}  // namespace hp::bench
