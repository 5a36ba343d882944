// The model options a run command parsed, as the family registry takes
// them (family/model_family.hpp). The structs must outlive the result.
#pragma once

#include "family/model_family.hpp"

namespace hp::cli {

struct CommandValues;

// Throws std::invalid_argument naming --layers-per-stage on a bad list.
family::FamilyOptions family_options(const CommandValues& values, const model::TransformerConfig& model,
                                     const train::LmDataOptions& data, const model::VisionConfig& vision,
                                     const model::HybridConfig& hybrid);

}  // namespace hp::cli
