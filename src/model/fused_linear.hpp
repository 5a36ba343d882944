// A linear layer's product whose backward adds the weight's gradient into
// weight.grad() inside the product (Megatron-LM's gradient accumulation
// fusion): one GEMM with beta 1 where autograd would make the product in a
// fresh tensor and add it in a second pass. Over many micro-batches that
// pass, the fresh tensor and its zeroing are most of a step's memory traffic
// after the products themselves.
//
// Contract: forward is at::linear(x, weight, bias), to the bit. Backward gives
// x's and bias's gradients as at::linear's does. The weight's gradient goes
// into weight.grad() when that is already a dense tensor of the weight's shape
// (the optimizer keeps one from the first step on); then autograd sees none
// for the weight, though its accumulator still runs, so hooks after it (the
// data-parallel reducer's) fire in the same order. Otherwise the gradient
// goes through autograd as at::linear's. Inside a DeferWeightGrads scope
// (a zero-bubble schedule's input backward) the weight's product is deferred
// to the stage's weight backward instead (runtime/weight_grad_store.hpp).
// No higher-order gradients.
#pragma once

#include <ATen/core/Tensor.h>

namespace hp::model {

at::Tensor fused_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace hp::model
