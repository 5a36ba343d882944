// Gradient snapshots for accumulating over several runs of a step, when only
// the latest run's contribution may go through a collective (DESIGN.md section
// 2, MPipe owner-backward: "only this run's contribution is reduced, then the
// earlier snapshot is added back"; the same holds for any gradient reduction
// inside an accumulation window):
//   auto snap = take_grad_snapshot(params);   // keeps the grads so far, zeroes them
//   ... backward of this run; reduce the grads ...
//   add_grad_snapshot(params, snap);          // grad += earlier contribution
//
// Contract: single-threaded; the snapshot holds copies, so it stays valid
// whatever happens to the grads in between.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace hp::runtime {

using NamedParams = std::map<std::string, at::Tensor>;
// name -> copy of the grad, for every parameter whose grad is defined.
using GradSnapshot = NamedParams;

// Copies each defined grad into the snapshot and zeroes it in place (the grad
// stays defined, so autograd keeps accumulating into the same tensor).
GradSnapshot take_grad_snapshot(const NamedParams& params);

// grad += snapshot[name] for every snapshot entry (an undefined grad becomes a
// copy). Throws std::invalid_argument for a name that is not in params or a
// shape that differs.
void add_grad_snapshot(const NamedParams& params, const GradSnapshot& snapshot);

}  // namespace hp::runtime
