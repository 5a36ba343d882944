// Tensor parallelism, Megatron-LM's (tensor_parallel/mappings.py, layers.py,
// cross_entropy.py): the collectives that autograd sees, and the layers
// whose weights are split over the TensorParallel group of the config.
//
// Contract: every rank of the group calls the same layers on inputs of the
// same shapes in the same order (each forward and backward is collective).
// With size 1 every function is the plain operation and nothing communicates.
// The layers register "weight" / "bias" like model::Linear and Embedding, so
// global parameter names are the same under any size; their tensors are this
// rank's shard (runtime/tensor_shard.hpp says how each is cut).
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <map>
#include <string>

#include "model/transformer_config.hpp"
#include "runtime/tensor_shard.hpp"

namespace hp::model {

// Forward: x. Backward: the gradient summed over the group (the input of a
// column-parallel region, which every rank consumes).
at::Tensor copy_to_tensor_parallel(const at::Tensor& x, const TensorParallel& tp);
// Forward: x summed over the group. Backward: the gradient (the output of a
// row-parallel region).
at::Tensor reduce_from_tensor_parallel(const at::Tensor& x, const TensorParallel& tp);

// Sequence parallelism (tensors [batch, seq, ...], split along seq):
// Forward: every rank's share of the sequence, concatenated in rank order.
// Backward: this rank's share of the gradient summed over the group.
at::Tensor gather_from_sequence_parallel(const at::Tensor& x, const TensorParallel& tp);
// Forward: x summed over the group, this rank's share of the sequence.
// Backward: the gradient's shares gathered.
at::Tensor reduce_scatter_to_sequence_parallel(const at::Tensor& x, const TensorParallel& tp);

// What a tensor-parallel region reads: the gathered sequence under sequence
// parallelism, else the input (copy_to_tensor_parallel).
at::Tensor enter_tensor_parallel(const at::Tensor& x, const TensorParallel& tp);
// What leaves a row-parallel region: the sum over the group, this rank's
// share of the sequence of it under sequence parallelism.
at::Tensor leave_tensor_parallel(const at::Tensor& x, const TensorParallel& tp);

// Sequence parallelism: a whole (not split) parameter acts on this rank's
// share of the sequence only, so its gradient is a partial sum over the
// group; this sums the gradients of every parameter not in `shards` (one
// all-reduce per dtype), once per optimizer step. Collective over the group;
// nothing without sequence parallelism.
void sum_sequence_parallel_grads(const std::map<std::string, at::Tensor>& params, const runtime::TensorShards& shards,
                                 const TensorParallel& tp);

// Per-token cross entropy of logits split over the vocabulary: rank r holds
// logits [..., V / size] of tokens [r V / size, (r + 1) V / size); target
// int64 [...] in [0, V). Values and gradients equal those of cross_entropy
// over the gathered logits, computed without gathering them.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target, const TensorParallel& tp);

// A module some of whose own parameters (not its children's) are split over
// the tensor-parallel group: it says how, by their names within it, and
// nothing at size 1. tensor_parallel_shards() collects these.
class TensorParallelModule {
 public:
  virtual ~TensorParallelModule() = default;
  virtual runtime::TensorShards own_shards() const = 0;
};

// y = x A^T + b with A's rows (the output features) split over the group:
// this rank computes its share of y's last dimension. `parts` > 1 for a fused
// projection ([q; k; v]: 3) whose parts are each split, so the shard is
// [q_r; k_r; v_r]. weight [parts * (out / parts) / size, in].
class ColumnParallelLinear : public torch::nn::Module, public TensorParallelModule {
 public:
  ColumnParallelLinear(int64_t in, int64_t out, bool with_bias, c10::ScalarType dtype, const TensorParallel& tp,
                       int parts = 1);
  torch::Tensor forward(const torch::Tensor& x);
  runtime::TensorShards own_shards() const override;

  torch::Tensor weight;
  torch::Tensor bias;

 private:
  TensorParallel tp_;
  int parts_;
};

// y = x A^T + b with A's columns (the input features) split: x holds this
// rank's share of the last dimension (a column-parallel output); the partial
// products are summed over the group, then the (whole) bias added.
// weight [out, in / size], bias [out].
class RowParallelLinear : public torch::nn::Module, public TensorParallelModule {
 public:
  RowParallelLinear(int64_t in, int64_t out, bool with_bias, c10::ScalarType dtype, const TensorParallel& tp);
  torch::Tensor forward(const torch::Tensor& x);
  runtime::TensorShards own_shards() const override;  // the weight's; the bias is whole

  torch::Tensor weight;
  torch::Tensor bias;

 private:
  TensorParallel tp_;
};

// A lookup table with its rows (the vocabulary) split over the group: ids
// outside this rank's rows look up zeros and the group sums the rows (under
// sequence parallelism into this rank's share of the sequence).
// weight [num / size, dim].
class VocabParallelEmbedding : public torch::nn::Module, public TensorParallelModule {
 public:
  VocabParallelEmbedding(int64_t num, int64_t dim, c10::ScalarType dtype, const TensorParallel& tp);
  torch::Tensor forward(const torch::Tensor& ids);
  runtime::TensorShards own_shards() const override;

  torch::Tensor weight;

 private:
  TensorParallel tp_;
};

// Every split parameter of `root`'s modules (TensorParallelModule), by its
// name under root (as root.named_parameters() names it); empty at size 1.
runtime::TensorShards tensor_parallel_shards(const torch::nn::Module& root);

// Sets every parameter of `root` to init(name, whole shape), or this rank's
// shard of it for a split one: the same values under any tensor-parallel size.
// A parameter whose module declares its rule (model/param_init.hpp) is drawn
// by that rule instead.
void initialize_parameters(torch::nn::Module& root, const TensorParallel& tp,
                           const std::function<at::Tensor(const std::string&, at::IntArrayRef)>& init);

}  // namespace hp::model
