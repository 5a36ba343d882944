// Micro-batch split and merge along the batch dimension (dim 0), as
// torch.distributed.pipelining's _microbatch: a batch of B rows becomes n
// micro-batches whose sizes differ by at most one (the first B % n get one more).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace hp::runtime {

// Throws std::invalid_argument when n < 1 or n > the batch size ("--mb 8 needs a
// batch of at least 8 sequences, got 4").
std::vector<at::Tensor> split_microbatches(const at::Tensor& batch, int n);
at::Tensor merge_microbatches(const std::vector<at::Tensor>& micros);

}  // namespace hp::runtime
