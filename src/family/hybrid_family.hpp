// The Hybrid family (--model hybrid): Mamba, attention, MLP and MoE layers
// from a pattern (train::HybridTask), decoded from byte prompts.
#pragma once

#include "family/model_family.hpp"

namespace hp::family {

ModelFamily hybrid_family();

}  // namespace hp::family
