// Static checks of a Schedule (DESIGN.md section 2): coverage, dependencies,
// pairwise FIFO matching of sends and receives, and freedom from deadlock
// under a blocking-rendezvous execution (a run of consecutive communication
// actions on a rank is posted as one batch that completes when every one of
// its operations has met its peer; collectives need every rank).
// Pure function of its input; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::schedule {

struct ValidationIssue {
  int rank = -1;      // -1 when not tied to one rank
  int position = -1;  // index in that rank's action list, -1 when none
  std::string message;  // names the action, e.g. "1F3: forward of stage 1 micro 3 appears twice"
};

struct ValidationResult {
  std::vector<ValidationIssue> issues;
  bool ok() const { return issues.empty(); }
  // One line per issue: "rank R position P (ACTION): message".
  std::string to_string() const;
};

ValidationResult validate(const Schedule& s);

}  // namespace hp::schedule
