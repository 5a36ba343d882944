#include "runtime/microbatch.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace hp::runtime {

std::int64_t bytes_of(const std::vector<MicroBatch>& micros) {
  std::int64_t n = 0;
  for (const MicroBatch& m : micros)
    for (const at::Tensor* t : {&m.input, &m.target, &m.extra})
      if (t->defined()) n += static_cast<std::int64_t>(t->nbytes());
  return n;
}

std::vector<at::Tensor> split_microbatches(const at::Tensor& batch, int n) {
  const auto rows = batch.dim() > 0 ? batch.size(0) : 0;
  if (n < 1 || n > rows)
    throw std::invalid_argument(std::to_string(n) + " micro-batches need a batch of at least " + std::to_string(n) +
                                " rows along dim 0, got " + std::to_string(rows));
  return at::tensor_split(batch, n, 0);
}

at::Tensor merge_microbatches(const std::vector<at::Tensor>& micros) { return at::cat(micros, 0); }

}  // namespace hp::runtime
