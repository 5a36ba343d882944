// choose_owners: MPipe's "auto" overflow (issue 13 part 5). Round-robin
// ("full") is not always best: an owner transposing in its prefix delays its
// own body, which hurts ranks whose body starts early; "min" loads rank 0
// instead. This picks an owner per micro-batch (a rank's prefix, or rank 0
// inline) that minimises the simulated step: it starts from the better of
// full and min and takes single-micro changes while they shorten the step, so
// the result is never worse than either. Deterministic: every rank of a job
// that calls it with the same options and costs gets the same owners.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "schedule/simulate.hpp"

namespace hp::schedule {

struct OwnerChoice {
  std::vector<int> owners;  // MPipeOptions::owners
  double step_time = 0;     // simulated, with these owners
  double full_step = 0;     // simulated under "full" and "min", for comparison
  double min_step = 0;
  int evaluations = 0;      // schedules simulated
};

// o: an MPipe layout (its overflow is ignored). At most `max_evaluations`
// schedules are simulated; the search stops early when a pass improves
// nothing. Throws std::invalid_argument for options the engine rejects.
OwnerChoice choose_owners(const ScheduleOptions& o, const CostModel& costs, int max_evaluations = 2000);

// "0 1 0i 1": each micro's owner, "0i" for rank 0 inline.
std::string format_owners(const std::vector<int>& owners);

}  // namespace hp::schedule
