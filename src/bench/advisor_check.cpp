#include "bench/advisor_check.hpp"

#include <algorithm>

#include "model/transformer_config.hpp"
#include "schedule/advise.hpp"

namespace hp::bench {
namespace {

// Whether a measured layout is the advisor's candidate `c` (owner-backward
// counts only where there is a preprocess backward to move, as the advisor
// considers it).
bool same_layout(const schedule::ScheduleOptions& a, const schedule::ScheduleOptions& c) {
  using schedule::ScheduleKind;
  if (a.kind != c.kind || a.vpp != c.vpp) return false;
  if (a.kind != ScheduleKind::MPipe) return true;
  const auto& m = a.mpipe;
  const bool owner_backward = m.owner_backward && m.transpose_layers > 0 && !c.mpipe.frozen_preprocess;
  return m.transpose_layers == c.mpipe.transpose_layers && m.overflow == c.mpipe.overflow &&
         owner_backward == c.mpipe.owner_backward && m.body == c.mpipe.body;
}

}  // namespace

std::optional<AdvisorCheck> check_advisor(const schedule::ModelProfile& profile, const model::EmulatedLayer& emulate,
                                          bool even_layers, int pp, int micro_batches,
                                          const std::vector<MeasuredLayout>& measured, std::string* why) {
  if (!emulate.active() || emulate.forward_ms <= 0) {
    *why = "it needs each layer's cost: give model.emulate";
    return std::nullopt;
  }
  if (!even_layers) {
    *why = "it splits the layers evenly: drop model.layers_per_stage";
    return std::nullopt;
  }
  if (pp < 2 || measured.empty()) {
    *why = "there is no pipeline to lay out";
    return std::nullopt;
  }
  const schedule::Advice advice = schedule::advise(profile, pp, micro_batches);
  AdvisorCheck check;
  check.first_choice = advice.ranked.front().name;
  check.first_predicted = advice.ranked.front().step_time;
  std::vector<bool> found(measured.size(), false);
  for (std::size_t i = 0; i < advice.ranked.size(); ++i)
    for (std::size_t k = 0; k < measured.size(); ++k) {
      if (found[k] || !same_layout(measured[k].layout, advice.ranked[i].options)) continue;
      found[k] = true;
      if (check.first_measured.empty()) {
        check.first_measured = measured[k].label;
        check.first_measured_rank = static_cast<int>(i) + 1;
      }
    }
  const MeasuredLayout* fastest = nullptr;
  for (std::size_t k = 0; k < measured.size(); ++k) {
    if (!found[k])
      check.not_candidates.push_back(measured[k].label);
    else if (!fastest || measured[k].measured_ms < fastest->measured_ms)
      fastest = &measured[k];
  }
  if (fastest) check.measured_fastest = fastest->label;
  return check;
}

}  // namespace hp::bench
