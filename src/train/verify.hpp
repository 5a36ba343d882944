// verify: one training step of a job's layout against the same model's
// single-process step (DESIGN.md section 4's oracle, for a user's own
// layout): the loss and every gradient, by global name. Run it in double
// precision before a long run on a new layout.
//
// Contract: collective over the job's group like train(); every rank builds
// the whole model once more for the reference, so it is for models that fit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "train/trainer.hpp"

namespace hp::train {

struct VerifyReport {
  double loss = 0;            // the pipelined step's
  double reference_loss = 0;  // the single process's
  double loss_error = 0;      // |loss - reference| / (1 + |reference|)
  // Every parameter's largest |g - g_ref| / (1 + |g_ref|) over its elements
  // (the shard a rank holds against the reference's shard), worst first; -1
  // for one no rank holds with a gradient (worst() counts it as infinite).
  std::vector<std::pair<std::string, double>> errors;
  double worst() const;
};

// One step (batch 0) of the options' layout and the reference; the report is
// complete on every rank. No optimizer step, no checkpoint.
VerifyReport verify(const TrainOptions& options, const Task& task, comm::ProcessGroup* pg);

}  // namespace hp::train
