// RankModel: everything one rank hands the runtime (runtime/pipeline.hpp):
// its stages, the loss, the parameters tied across stages and, for MPipe
// Transpose, the preprocess module. Models are users of this API
// (model/gpt_stages.hpp, model/vl_stages.hpp, examples/custom_model/).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/pipeline_stage.hpp"
#include "runtime/tensor_shard.hpp"

namespace hp::runtime {

// MPipe Transpose's preprocess (spec D2/D3): the first block of stage 0 that
// the schedule runs on idle ranks. Every rank holds one with the same
// structure: rank 0 the trained parameters, the others a replica that
// MPIPE_PARAM_BROADCAST overwrites. Stage 0's PipelineStage then holds only
// the rest of its chunk (body0). A preprocess whose parameters all have
// requires_grad false is frozen: broadcast once, never backpropagated.
struct Preprocess {
  // A plain autograd function of its input (the micro's input) and the
  // parameters; grad mode decides whether it records a graph. It never
  // modifies its input.
  std::function<at::Tensor(const at::Tensor& input)> forward;
  NamedTensors parameters;  // global names, the same order on every rank
  // Optional shapes of what travels for micro m: the preprocess input
  // (MPIPE_GRAPH_*) and output (MPIPE_FWD_*). Empty: learned on the first step.
  std::function<TensorSpec(int micro)> input_spec;
  std::function<TensorSpec(int micro)> output_spec;
};

struct RankModel {
  // This rank's stages, any order; their indices must be exactly the stages
  // the layout gives the rank.
  std::vector<PipelineStage> stages;
  // The last stage's loss of one micro-batch (a 0-dim tensor, a mean over the
  // micro's elements); the runtime weights micro m by its share of the step's
  // target elements, so the step's loss is the mean over all of them.
  // Required on the rank that holds the last stage.
  std::function<at::Tensor(const at::Tensor& output, const at::Tensor& target)> loss;
  // Global names held by several stages (on one rank or several) whose
  // gradients are summed over every holder after the backward
  // (Pipeline::reduce_tied_grads). Every rank passes the same list.
  std::vector<std::string> tied_parameters;
  // Optional: stage s's output shape and dtype for micro m (what a receiver
  // allocates). Empty: the runtime learns every shape with a meta message on
  // the first step and checks later steps against it (shapes that change
  // from step to step need ExecutorOptions::variable_seq_len). Every rank
  // gives it or none does: it decides the message protocol.
  std::function<TensorSpec(int stage, int micro)> output_spec;
  // MPipe Transpose with T >= 1 only, on every rank.
  std::shared_ptr<Preprocess> preprocess;
  // Optional model-specific values of the latest step (MTP losses, say) for
  // the training loop to report; the runtime does not use them. Every rank
  // lists the same names; `metrics` (may be empty) returns one value per name,
  // 0 for those this rank does not compute, so a sum over ranks is the value.
  std::vector<std::string> metric_names;
  std::function<std::vector<double>()> metrics;
  // Tensor parallelism: the parameters (by global name) that this rank holds
  // a shard of; the others are whole on every rank of the tp group. The
  // runtime does not use it: the training loop gathers the shards for
  // checkpoints and counts the whole ones once in the gradient norm.
  TensorShards tensor_parallel;
  // Sequence parallelism: every whole parameter's gradient is a partial sum
  // over the tp group, which the training loop completes once per step
  // (model::sum_sequence_parallel_grads).
  bool sequence_parallel = false;
};

}  // namespace hp::runtime
