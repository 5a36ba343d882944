// `hyperpipe bench`'s check of the advisor (`plan --advise`,
// schedule/advise.hpp) against the measured winner: the model's profile is
// the emulated layer costs of the run (--emulate-layer-ms: every text layer
// and tower block; embeddings, heads and messages left out, as a user who
// knows only the layers would give plan), and the advisor's ranking of the
// layouts the run measured is set beside their measured order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::model {
struct EmulatedLayer;
}
namespace hp::schedule {
struct ModelProfile;
}

namespace hp::bench {

struct MeasuredLayout {
  std::string label;  // as bench prints it ("mpipe v1")
  schedule::ScheduleOptions layout;
  double measured_ms = 0;
};

struct AdvisorCheck {
  std::string first_choice;  // the advisor's first choice of all its candidates
  double first_predicted = 0;
  std::string first_measured;  // the measured layout it ranks first ("" when it ranks none of them)
  int first_measured_rank = 0;  // its place in the advisor's whole ranking, from 1
  std::string measured_fastest;  // of the measured layouts among its candidates
  std::vector<std::string> not_candidates;  // measured layouts the advisor does not consider (GPipe, ...)
  bool agrees() const { return first_measured == measured_fastest; }
};

// Nullopt with *why set when the advisor cannot be asked (no emulated costs,
// uneven --layers-per-stage, no pipeline). `profile`: the model family's at
// the emulated costs (family::ModelFamily::profile).
std::optional<AdvisorCheck> check_advisor(const schedule::ModelProfile& profile, const model::EmulatedLayer& emulate,
                                          bool even_layers, int pp, int micro_batches,
                                          const std::vector<MeasuredLayout>& measured, std::string* why);

}  // namespace hp::bench
