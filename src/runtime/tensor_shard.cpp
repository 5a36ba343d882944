#include "runtime/tensor_shard.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

namespace hp::runtime {
namespace {

void check(const TensorShard& s, int64_t rows, int size, int dims) {
  if (s.dim < 0 || s.dim >= dims || s.parts < 1 || size < 1 || rows % (static_cast<int64_t>(s.parts) * size) != 0)
    throw std::invalid_argument("a tensor of " + std::to_string(rows) + " entries along dimension " +
                                std::to_string(s.dim) + " does not split into " + std::to_string(s.parts) +
                                " part(s) over " + std::to_string(size) + " ranks");
}

}  // namespace

at::Tensor shard_of(const at::Tensor& full, const TensorShard& s, int rank, int size) {
  check(s, s.dim < full.dim() ? full.size(s.dim) : 0, size, static_cast<int>(full.dim()));
  const int64_t block = full.size(s.dim) / s.parts, piece = block / size;
  std::vector<at::Tensor> pieces;
  for (int p = 0; p < s.parts; ++p) pieces.push_back(full.narrow(s.dim, p * block + rank * piece, piece));
  return at::cat(pieces, s.dim).contiguous();
}

at::Tensor unshard(const std::vector<at::Tensor>& shards, const TensorShard& s) {
  const int size = static_cast<int>(shards.size());
  if (size == 0) throw std::invalid_argument("unshard: no shards");
  const int64_t piece = shards[0].size(s.dim) / s.parts;
  std::vector<at::Tensor> pieces;
  for (int p = 0; p < s.parts; ++p)
    for (const auto& t : shards) pieces.push_back(t.narrow(s.dim, p * piece, piece));
  return at::cat(pieces, s.dim);
}

std::vector<int64_t> unsharded_shape(at::IntArrayRef shard_shape, const TensorShard& s, int size) {
  std::vector<int64_t> shape(shard_shape.begin(), shard_shape.end());
  shape.at(s.dim) *= size;
  return shape;
}

}  // namespace hp::runtime
