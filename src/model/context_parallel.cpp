#include "model/context_parallel.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

#include "model/parallel_mappings.hpp"

namespace hp::model {

at::Tensor context_parallel_positions(int64_t seq, const ContextParallel& cp) {
  const auto opts = at::TensorOptions().dtype(at::kLong);
  if (cp.size == 1) return at::arange(seq, opts);
  if (seq % (2 * cp.size) != 0)
    throw std::invalid_argument("context parallelism: sequence length " + std::to_string(seq) +
                                " is not divisible by 2 x the context-parallel size " + std::to_string(cp.size));
  const int64_t chunk = seq / (2 * cp.size);
  return at::cat({at::arange(cp.rank * chunk, (cp.rank + 1) * chunk, opts),
                  at::arange((2 * cp.size - 1 - cp.rank) * chunk, (2 * cp.size - cp.rank) * chunk, opts)});
}

at::Tensor context_parallel_share(const at::Tensor& x, int64_t dim, const ContextParallel& cp) {
  if (cp.size == 1) return x;
  return x.index_select(dim, context_parallel_positions(x.size(dim), cp));
}

at::Tensor gather_context_parallel(const at::Tensor& x, int64_t dim, const ContextParallel& cp) {
  if (cp.size == 1) return x;
  if (!cp.group)
    throw std::logic_error("context parallel size " + std::to_string(cp.size) +
                           " but the model was built without its process group (model.context_parallel.group)");
  // Rank order holds chunks r, 2 cp - 1 - r of every rank r in turn; sort them by position.
  const at::Tensor by_rank = all_gather_along(x.contiguous(), dim, *cp.group);
  const int64_t seq = by_rank.size(dim);
  std::vector<at::Tensor> positions;
  for (int r = 0; r < cp.size; ++r) {
    ContextParallel other = cp;
    other.rank = r;
    positions.push_back(context_parallel_positions(seq, other));
  }
  // where[p] = the index in rank order of position p.
  const at::Tensor where = at::argsort(at::cat(positions));
  return by_rank.index_select(dim, where);
}

}  // namespace hp::model
