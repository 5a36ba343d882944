#include "runtime/microbatch.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace hp::runtime {

std::vector<at::Tensor> split_microbatches(const at::Tensor& batch, int n) {
  const auto rows = batch.dim() > 0 ? batch.size(0) : 0;
  if (n < 1 || n > rows)
    throw std::invalid_argument(std::to_string(n) + " micro-batches need a batch of at least " + std::to_string(n) +
                                " rows along dim 0, got " + std::to_string(rows));
  return at::tensor_split(batch, n, 0);
}

at::Tensor merge_microbatches(const std::vector<at::Tensor>& micros) { return at::cat(micros, 0); }

}  // namespace hp::runtime
