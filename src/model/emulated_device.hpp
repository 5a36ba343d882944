// Emulated devices: every transformer layer (text and vision) takes a fixed
// time, spent sleeping, so that a pipeline of 4 to 16 ranks on a machine of a
// few cores runs as it would with one device per rank: the ranks overlap
// instead of sharing cores. Activations keep their real shapes, so P2P and
// broadcasts move their real bytes. Used to measure schedules (hyperpipe
// bench), never for training a model. The per-layer times are
// TransformerConfig::emulate (model::EmulatedLayer).
#pragma once

#include <ATen/core/Tensor.h>

namespace hp::model {

// A new tensor equal to x, made after sleeping forward_ms; its backward
// sleeps backward_ms and passes the gradient through unchanged. The second
// half of that sleep stands for the weights' gradients: inside a split
// backward's input part (runtime/weight_grad_store.hpp) it waits for the W.
at::Tensor emulated_delay(const at::Tensor& x, double forward_ms, double backward_ms);

}  // namespace hp::model
