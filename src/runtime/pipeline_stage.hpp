// PipelineStage: one global stage of a user's model, as a rank hands it to the
// runtime (torch.distributed.pipelining's PipelineStage(submodule, stage_index)).
//
// The runtime never builds models: any callable that LibTorch autograd can
// differentiate is a stage. Stages are numbered globally in the schedule's
// placement (ScheduleOptions::stage_of): loop, s = chunk * pp + rank, so rank
// r holds stages r, r + pp, ..., r + (v-1) pp; or V (zbv), r and 2 pp - 1 - r.
// runtime/module_stage.hpp turns a torch::nn::Module into a PipelineStage.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/microbatch.hpp"

namespace hp::runtime {

// Parameters by GLOBAL name ("layers.7.mlp.fc1.weight"): the same name on
// every layout, so optimizer state and checkpoints move between layouts.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Shape and dtype of a tensor that travels between ranks.
struct TensorSpec {
  std::vector<std::int64_t> shape;
  c10::ScalarType dtype = c10::ScalarType::Float;
};

struct PipelineStage {
  int index = -1;  // global stage
  // Contract: a plain autograd function of `input` and the parameters, run on
  // the rank's thread. `input` is stage 0's micro.input (data) or the previous
  // stage's output as a leaf that collects its gradient; `micro` is this
  // rank's view of the micro-batch (its fields may be undefined on ranks that
  // do not read them). The output must not be `input` or a view of it (an
  // empty stage returns a graph-connected copy), and its own backward must not
  // need it (a final add or clone, not a tanh), so that a sent output can be
  // pseudo-deallocated. The last stage's output goes to the loss.
  std::function<at::Tensor(const at::Tensor& input, const MicroBatch& micro)> forward;
  // Every parameter the forward uses, by global name. A name held by several
  // stages (a tied embedding) must be declared in RankModel::tied_parameters.
  NamedTensors parameters;
};

}  // namespace hp::runtime
