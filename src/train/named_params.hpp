// NamedParams: one rank's parameters keyed by their GLOBAL name
// ("layers.7.attention.qkv.weight"), the same for every pipeline layout.
//
// The tensors are handles to the live module parameters (shared storage): the
// train/ code updates them in place and never keeps copies. std::map keeps the
// names sorted, so every loop over a map is in the same order on every rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace hp::train {

using NamedParams = std::map<std::string, at::Tensor>;

}  // namespace hp::train
