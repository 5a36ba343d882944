// Language-model loss on the last stage's logits.
#pragma once

#include <ATen/core/Tensor.h>

#include "model/transformer_config.hpp"

namespace hp::model {

// Mean token cross entropy: logits [batch, seq, vocab] (floating), labels int64
// [batch, seq] with values in [0, vocab). Returns a 0-dim tensor, averaged over
// all batch * seq tokens (so equal-sized micro-batches average to the full-batch
// loss). Shape or dtype mismatches throw std::invalid_argument. Under tensor
// parallelism the logits are this rank's vocabulary share [batch, seq,
// vocab / tp] and the loss is the same (model::vocab_parallel_cross_entropy).
at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& labels, const TensorParallel& tp = {});

}  // namespace hp::model
