// Global gradient-norm clipping across pipeline ranks (torch's
// clip_grad_norm_ with norm type 2, over the whole model).
//
// Each rank sums the squares of its parameters' grads, skipping the names in
// `duplicates` (copies of a parameter whose grad another rank also holds and
// counts, e.g. the tied word embedding on the last stage), so every global
// parameter counts once. all_reduce_sum adds the rank sums over the pipeline
// group; total = sqrt(sum). When total > max_norm (and max_norm > 0), every
// grad on the rank, duplicates included, is multiplied by
// max_norm / (total + 1e-6). The grads are left alone when the total is not
// finite: the caller sees the returned NaN/inf and skips the step.
//
// Contract: every rank of the group calls it once per step (all_reduce_sum is
// a collective). Params without a grad contribute nothing. Single-threaded.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "train/named_params.hpp"

namespace hp::train {

struct GradClipOptions {
  double max_norm = 1.0;  // --clip-grad: >= 0; 0 computes the norm but never clips
  double eps = 1e-6;      // added to the norm in the scale factor, as torch does
};

// The sum over ranks of the given local value; an empty function means one
// rank (the identity).
using AllReduceSum = std::function<double(double)>;

// Sum of squares of this rank's grads, excluding `duplicates` (in double).
// Throws std::invalid_argument when a duplicate is not a name in params.
double local_grad_sq_sum(const NamedParams& params, const std::set<std::string>& duplicates = {});

// Returns the global norm before clipping. Throws std::invalid_argument for a
// bad --clip-grad or an unknown duplicate name.
double clip_grad_norm(const NamedParams& params, const GradClipOptions& options,
                      const AllReduceSum& all_reduce_sum, const std::set<std::string>& duplicates = {});

}  // namespace hp::train
