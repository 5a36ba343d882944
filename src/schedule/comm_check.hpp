// The communication half of validate() (validate.hpp): pairs every send with
// the receive that the runtime's per-pair FIFO channels deliver it to, lines
// up the collectives of every rank by sequence number, then runs the schedule
// under blocking rendezvous to find a deadlock. Internal to src/schedule.
//
// Contract: expects a structurally sound schedule (ranks, stages, micros and
// peers in range, as validate() checks first). Returns the issues in the order
// found: FIFO mismatches and unmatched sends or receives (the first per ordered
// rank pair), collective sequence mismatches, then at most one deadlock issue
// naming every blocked rank. Messages tied to an action start with its token.
// With `operations`, also stores the rendezvous run's own work there: each
// visit to a rank plus each action it steps over or posts, at most
// 2 x actions + ranks (a rank is visited again only when a batch of its
// completes): an operation count for complexity tests, which load cannot
// skew. Pure function; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "schedule/schedule.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {

std::vector<ValidationIssue> check_communication(const Schedule& s, std::int64_t* operations = nullptr);

}  // namespace hp::schedule
