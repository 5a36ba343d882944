// Schedule generators. Each returns a complete Schedule (compute plus
// communication) for the options, or throws std::invalid_argument with a
// message that says what was wrong and what is allowed.
#pragma once

#include "schedule/schedule.hpp"

namespace hp::schedule {

// Checks the options without generating ("--pp must be >= 1, got 0").
void check_options(const ScheduleOptions& o);

// Dispatches on o.kind.
Schedule generate(const ScheduleOptions& o);

// Compute-only per-rank orders of the body (F and B actions only).
std::vector<std::vector<Action>> body_compute_order(const ScheduleOptions& o);

// Inserts the body's SEND_F/RECV_F/SEND_B/RECV_B around the compute actions in
// an order that cannot deadlock under blocking rendezvous.
std::vector<std::vector<Action>> insert_body_comms(const ScheduleOptions& o,
                                                   std::vector<std::vector<Action>> compute);

// MPipe Transpose (spec section 4): the interleaved body with the MPIPE_* steps
// layered around it. Removing every MPIPE_* action leaves the body unchanged.
Schedule generate_mpipe(const ScheduleOptions& o);

// Drops every action for which keep returns false.
Schedule filter(const Schedule& s, bool (*keep)(ActionType));

}  // namespace hp::schedule
