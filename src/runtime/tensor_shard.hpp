// TensorShard: how a tensor-parallel parameter is cut over its group, so that
// checkpoints, the gradient norm and tests can move between a rank's shard and
// the whole tensor (which keeps the parameter's global name and shape).
//
// Dimension `dim` is seen as `parts` equal blocks (a fused [q; k; v]
// projection: 3) and each block is split evenly over the group: rank r holds
// the r-th piece of every block, concatenated in block order. Plain values.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hp::runtime {

struct TensorShard {
  int dim = 0;
  int parts = 1;
};

// Rank `rank`'s shard of `full` (a new tensor). Throws std::invalid_argument
// when the dimension does not split evenly.
at::Tensor shard_of(const at::Tensor& full, const TensorShard& shard, int rank, int size);
// The whole tensor from every rank's shard, in rank order.
at::Tensor unshard(const std::vector<at::Tensor>& shards, const TensorShard& shard);
// The whole tensor's shape from one shard's.
std::vector<int64_t> unsharded_shape(at::IntArrayRef shard_shape, const TensorShard& shard, int size);

// Parameters split over the tensor-parallel group, by global name; the
// others are whole on every rank of it.
using TensorShards = std::map<std::string, TensorShard>;

}  // namespace hp::runtime
