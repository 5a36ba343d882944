// module_stage(): a torch::nn::Module (or a holder such as torch::nn::Sequential)
// as a PipelineStage. Header-only; it includes <torch/nn/module.h>, so only
// code that builds modules pays for it.
//
//   auto body = torch::nn::Sequential(torch::nn::Linear(8, 8), torch::nn::Tanh());
//   rank_model.stages.push_back(runtime::module_stage(1, body, "blocks.1."));
//
// The stage shares the module (the runtime keeps it alive); parameters get the
// global names `prefix + module's own name`.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>

#include "runtime/pipeline_stage.hpp"

namespace hp::runtime {

// A module's parameters under `prefix + their own name`.
inline NamedTensors parameters_of(const torch::nn::Module& module, const std::string& prefix = "") {
  NamedTensors out;
  for (const auto& p : module.named_parameters()) out.emplace_back(prefix + p.key(), p.value());
  return out;
}

template <class M>
PipelineStage module_stage(int index, std::shared_ptr<M> module, const std::string& prefix = "") {
  PipelineStage s;
  s.index = index;
  s.forward = [module](const at::Tensor& x, const MicroBatch&) -> at::Tensor { return module->forward(x); };
  s.parameters = parameters_of(*module, prefix);
  return s;
}

template <class Contained>
PipelineStage module_stage(int index, const torch::nn::ModuleHolder<Contained>& holder,
                           const std::string& prefix = "") {
  return module_stage(index, holder.ptr(), prefix);
}

}  // namespace hp::runtime
