// Weight gradients deferred from a stage's input backward (BWD_I) to its
// weight backward (BWD_W): the zero-bubble split (sail-sg's WeightGradStore).
//
// A backward run inside a DeferWeightGrads scope hands each weight-gradient
// product that a layer can defer to defer_weight_grad() instead of computing
// it; the stage runs them later, when the schedule reaches its W. A layer
// that defers nothing (or runs outside any scope) computes its weights'
// gradients in the backward itself, which stays correct: W then has less or
// nothing to do. Layers defer the work, not its result, so I + W costs what B
// costs and nothing is recomputed.
//
// Threading: the scope is per thread. LibTorch runs a CPU backward on the
// thread that calls it, re-entrant ones (recompute) included, so every
// product of one stage's backward reaches that stage's list.
#pragma once

#include <functional>
#include <vector>

namespace hp::runtime {

using WeightGradWork = std::vector<std::function<void()>>;

// While alive, backwards on this thread defer into `into` (not owned; must
// outlive the scope). Scopes nest; the innermost wins.
class DeferWeightGrads {
 public:
  explicit DeferWeightGrads(WeightGradWork* into);
  ~DeferWeightGrads();
  DeferWeightGrads(const DeferWeightGrads&) = delete;
  DeferWeightGrads& operator=(const DeferWeightGrads&) = delete;

 private:
  WeightGradWork* previous_;
};

// Queues `work` in the current scope and returns true; false (and runs
// nothing) outside any scope, where the caller computes the gradient itself.
bool defer_weight_grad(std::function<void()> work);

}  // namespace hp::runtime
