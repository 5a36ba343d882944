// BodyComms (comm_insert.hpp), the per-rank form of insert_body_comms that
// generate_mpipe writes from.
#include "schedule/comm_insert.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "hand_schedules.hpp"
#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

ScheduleOptions interleaved(int pp, int vpp, int mb) { return testing::layout(ScheduleKind::Interleaved, pp, vpp, mb); }

TEST(BodyComms, AppendsWhatInsertBodyCommsReturns) {
  // PP 2 with v > 1 needs deadlock repairs; PP 4, MB 6 FIFO ones.
  for (const ScheduleOptions& o : {interleaved(2, 3, 5), interleaved(4, 2, 6), interleaved(3, 1, 4)}) {
    const auto order = body_compute_order(o);
    const auto want = insert_body_comms(o, order);
    const BodyComms body(o, order);
    ASSERT_EQ(body.pp(), o.pp);
    for (int r = 0; r < o.pp; ++r) {
      // Appending keeps what the list already holds.
      std::vector<Action> got = {Action{ActionType::MPIPE_PARAM_BROADCAST, 0, -1, -1}};
      body.append(r, got);
      ASSERT_EQ(got.size(), 1 + want[r].size()) << "rank " << r;
      EXPECT_EQ(body.size(r), want[r].size()) << "rank " << r;
      EXPECT_EQ(got[0].type, ActionType::MPIPE_PARAM_BROADCAST);
      EXPECT_EQ(std::vector<Action>(got.begin() + 1, got.end()), want[r]) << "rank " << r;
    }
  }
}

TEST(BodyComms, RejectsABadOrderAsInsertBodyCommsDoes) {
  const ScheduleOptions o = interleaved(2, 1, 2);
  EXPECT_THROW(BodyComms(o, {{}}), std::invalid_argument);
}

}  // namespace
}  // namespace hp::schedule
