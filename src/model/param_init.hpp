// How a parameter starts, declared by the module that registers it.
//
// A model draws each parameter's initial value from its GLOBAL name and whole
// shape (so every layout and tensor-parallel size starts from the same
// values; initialize_parameters in tensor_parallel.hpp). Rules keyed by a
// name suffix miss a module registered under another name (the Hybrid
// layer's "hc" beside the GPT's "attention_hc"); a module that implements
// DeclaresInit says how its own parameters start, by their local names, and
// that rule wins over the model's generic one (norm weights 1, biases 0,
// the rest normal).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "runtime/fnv1a.hpp"

namespace torch::nn {
class Module;
}

namespace hp::model {

// A parameter's initial value from its global name and whole shape.
using ParamInit = std::function<at::Tensor(const std::string& name, at::IntArrayRef shape)>;

class DeclaresInit {
 public:
  virtual ~DeclaresInit() = default;
  // Local parameter name (as the module's named_parameters() names it) -> its rule.
  virtual std::map<std::string, ParamInit> own_inits() const = 0;
};

// Every value `value`.
ParamInit constant_init(double value, c10::ScalarType dtype);
// Xavier-uniform over [out, in]: U(+-sqrt(6 / (out + in))), drawn in double
// from a generator seeded with seed ^ fnv1a64(global name).
ParamInit xavier_uniform_init(std::uint64_t seed, c10::ScalarType dtype);

// The declared rules of root's modules, by parameter name under root.
std::map<std::string, ParamInit> declared_inits(const torch::nn::Module& root);

// FNV-1a of a name: the per-parameter part of every seeded draw.
using runtime::fnv1a64;

}  // namespace hp::model
