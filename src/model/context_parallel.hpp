// Context parallelism (Megatron's, with its load-balanced chunks): a
// sequence of S positions is cut into 2 x cp equal chunks and context-parallel
// rank r holds chunks r and 2 cp - 1 - r, so that under causal attention every
// rank has the same work. Everything between attentions (norms, MLPs, the
// activations between stages) runs on this rank's S / cp positions; attention
// gathers the keys and values of the whole sequence and masks by global
// position.
//
// Contract: collective over the ContextParallel group like the tensor
// parallel layers (model/tensor_parallel.hpp); with size 1 every function is
// the identity.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "model/transformer_config.hpp"

namespace hp::model {

// The global positions of this rank's tokens, int64 [seq / size], ascending.
// Throws std::invalid_argument unless seq is divisible by 2 x size.
at::Tensor context_parallel_positions(int64_t seq, const ContextParallel& cp);
// This rank's positions of x along `dim`, which holds the whole sequence.
at::Tensor context_parallel_share(const at::Tensor& x, int64_t dim, const ContextParallel& cp);
// Forward: the whole sequence along `dim`, in position order, from every
// rank's share. Backward: this rank's share of the gradient summed over the
// group (every rank's queries read every key).
at::Tensor gather_context_parallel(const at::Tensor& x, int64_t dim, const ContextParallel& cp);

}  // namespace hp::model
