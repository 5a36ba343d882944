#include "cli/family_options.hpp"

#include "cli/option_flags.hpp"
#include "cli/option_schema.hpp"

namespace hp::cli {

family::FamilyOptions family_options(const CommandValues& values, const model::TransformerConfig& model,
                                     const train::LmDataOptions& data, const model::VisionConfig& vision,
                                     const model::HybridConfig& hybrid) {
  family::FamilyOptions o;
  o.model = model;
  if (!values.layers_per_stage.empty()) o.layers_per_stage = layer_counts_from_flag(values.layers_per_stage);
  o.data = &data;
  o.vision = &vision;
  o.hybrid = &hybrid;
  return o;
}

}  // namespace hp::cli
