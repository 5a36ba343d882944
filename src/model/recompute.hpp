// recompute_in_backward: activation recomputation for LibTorch C++, which has
// no torch.utils.checkpoint. fn runs without recording a graph, so none of its
// intermediates are kept; in backward it runs again, with grad, on detached
// copies of its inputs and is differentiated there (reentrant, as PyTorch's
// checkpoint): its inputs get their gradients through the returned outputs'
// backward, and the parameters fn uses accumulate theirs directly.
//
// Contract: fn is a deterministic function of its inputs and the parameters
// it captures (the same values in forward and in the recompute); the inputs
// must not change in place before the backward (checked); outputs are
// floating point, new tensors (not an input or a view of one). One backward
// per call (the saved inputs are released by it; a second one throws).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace hp::model {

using RecomputeFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

std::vector<at::Tensor> recompute_in_backward(const RecomputeFn& fn, const std::vector<at::Tensor>& inputs);

}  // namespace hp::model
