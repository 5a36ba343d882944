#include "model/param_init.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <cmath>

namespace hp::model {

ParamInit constant_init(double value, c10::ScalarType dtype) {
  return [value, dtype](const std::string&, at::IntArrayRef shape) {
    return at::full(shape, value, at::TensorOptions().dtype(dtype));
  };
}

ParamInit xavier_uniform_init(std::uint64_t seed, c10::ScalarType dtype) {
  return [seed, dtype](const std::string& name, at::IntArrayRef shape) {
    auto gen = at::detail::createCPUGenerator(seed ^ fnv1a64(name));
    const double bound = std::sqrt(6.0 / static_cast<double>(shape[0] + shape[1]));
    return at::empty(shape, at::TensorOptions().dtype(at::kDouble)).uniform_(-bound, bound, gen).to(dtype);
  };
}

std::map<std::string, ParamInit> declared_inits(const torch::nn::Module& root) {
  std::map<std::string, ParamInit> out;
  auto add = [&out](const std::string& prefix, const torch::nn::Module& module) {
    if (const auto* m = dynamic_cast<const DeclaresInit*>(&module))
      for (auto& [name, init] : m->own_inits()) out[prefix + name] = init;
  };
  add("", root);  // (root may be under construction: not yet in a shared_ptr)
  for (const auto& item : root.named_modules("", /*include_self=*/false)) add(item.key() + ".", *item.value());
  return out;
}

}  // namespace hp::model
