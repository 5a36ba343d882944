// inject_loss: an auxiliary loss computed inside a stage (the MoE balance
// loss, the MTP loss) enters training through its gradient: the stage's output
// carries it into backward (Megatron-LM's MoEAuxLossAutoScaler), so no stage
// has to ship the loss to the last one.
#pragma once

#include <ATen/core/Tensor.h>

namespace hp::model {

// A copy of `output` whose backward also starts `loss`'s gradient, with
// d loss / d loss = scale.
at::Tensor inject_loss(const at::Tensor& output, const at::Tensor& loss, double scale);

}  // namespace hp::model
