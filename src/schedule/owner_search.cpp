#include "schedule/owner_search.hpp"

#include <limits>
#include <stdexcept>

#include "schedule/generate.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

// The simulated step with explicit owners; +inf when the schedule is invalid.
double step_with(ScheduleOptions o, const std::vector<int>& owners, const CostModel& costs) {
  o.mpipe.overflow = Overflow::Auto;
  o.mpipe.owners = owners;
  const Schedule s = generate(o);
  if (!validate(s).ok()) return std::numeric_limits<double>::infinity();
  return simulate(s, costs).step_time;
}

// The owners `overflow` gives each micro-batch, as MPipeOptions::owners lists them.
std::vector<int> owners_of(ScheduleOptions o, Overflow overflow) {
  o.mpipe.overflow = overflow;
  std::vector<int> owners(o.micro_batches);
  for (int m = 0; m < o.micro_batches; ++m) owners[m] = mpipe_inline_on_rank0(o, m) ? -1 : mpipe_owner(o, m);
  return owners;
}

}  // namespace

OwnerChoice choose_owners(const ScheduleOptions& options, const CostModel& costs, int max_evaluations) {
  if (options.kind != ScheduleKind::MPipe) throw std::invalid_argument("choose_owners needs an MPipe layout");
  ScheduleOptions o = options;
  o.mpipe.overflow = Overflow::Full;
  check_options(o);
  const int mb = o.micro_batches, nt = o.nt();
  const std::vector<int> full = owners_of(o, Overflow::Full), min = owners_of(o, Overflow::Min);
  OwnerChoice c;
  c.full_step = step_with(o, full, costs);
  c.min_step = step_with(o, min, costs);
  c.evaluations = 2;
  const bool min_better = c.min_step < c.full_step;
  c.owners = min_better ? min : full;
  c.step_time = min_better ? c.min_step : c.full_step;
  // First improvement over single-micro moves; strict gains only, so ties keep the start.
  for (bool improved = true; improved && c.evaluations < max_evaluations;) {
    improved = false;
    for (int m = 0; m < mb && c.evaluations < max_evaluations; ++m) {
      for (int owner = -1; owner < nt && c.evaluations < max_evaluations; ++owner) {
        if (owner == c.owners[m]) continue;
        std::vector<int> next = c.owners;
        next[m] = owner;
        const double t = step_with(o, next, costs);
        ++c.evaluations;
        if (t < c.step_time * (1 - 1e-12)) {
          c.owners = std::move(next);
          c.step_time = t;
          improved = true;
        }
      }
    }
  }
  return c;
}

std::string format_owners(const std::vector<int>& owners) {
  std::string out;
  for (int o : owners) out += (out.empty() ? "" : " ") + (o < 0 ? std::string("0i") : std::to_string(o));
  return out;
}

}  // namespace hp::schedule
