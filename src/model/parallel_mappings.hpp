// The collectives of model parallelism as autograd sees them (Megatron's
// tensor_parallel/mappings.py), over any process group: tensor parallelism
// (model/tensor_parallel.hpp) and context parallelism
// (model/context_parallel.hpp) are made of these.
//
// Contract: collective over `g` in forward and in backward; every rank calls
// them in the same order with tensors of the same shapes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hp::comm {
class ProcessGroup;
}

namespace hp::model {

// Forward: x. Backward: the gradient summed over the group.
at::Tensor copy_to_group(const at::Tensor& x, comm::ProcessGroup& g);
// Forward: x summed over the group. Backward: the gradient.
at::Tensor reduce_from_group(const at::Tensor& x, comm::ProcessGroup& g);
// Forward: every rank's x concatenated along dim in rank order. Backward:
// this rank's piece of the gradient summed over the group.
at::Tensor all_gather_along(const at::Tensor& x, int64_t dim, comm::ProcessGroup& g);
// Forward: this rank's piece along dim of x summed over the group (size(dim)
// divisible by the group's size). Backward: the gradient's pieces gathered.
at::Tensor reduce_scatter_along(const at::Tensor& x, int64_t dim, comm::ProcessGroup& g);

}  // namespace hp::model
