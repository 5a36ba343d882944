#include "runtime/action_trace.hpp"

#include <gtest/gtest.h>

namespace hp::runtime {
namespace {

TEST(ActionTrace, EventsRoundTripThroughJson) {
  ActionTrace t;
  const double a = t.now_us();
  schedule::Action f{schedule::ActionType::FWD, 2, 3, -1};
  schedule::Action s{schedule::ActionType::SEND_F, 2, 3, 3};
  t.add({"2F3", "compute", f, a, a + 10, 0, 1, a + 2});
  t.add({"wait Activation(stage 1, micro 3)", "wait", f, a + 1, a + 2, 4096});
  t.add({"send", "post", s, a + 11, a + 12, 4096});
  t.add({"gradient and loss reductions", "wait", schedule::Action{}, a + 13, a + 14, 0});
  // Actions without a micro-batch stay themselves (read back as FWD, a broadcast
  // once passed for a zero-length forward of stage 0 and halved its measured cost).
  t.add({"0MPIPE_PARAM_BROADCAST", "compute", {schedule::ActionType::MPIPE_PARAM_BROADCAST, 0, -1, -1}, a + 15, a + 16, 0});
  t.add({"0MPIPE_GRAD_REDUCE", "compute", {schedule::ActionType::MPIPE_GRAD_REDUCE, 0, -1, -1}, a + 17, a + 18, 0});
  const auto back = trace_events_from_json(trace_events_json(t.events()));
  ASSERT_EQ(back.size(), 6u);
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].name, t.events()[i].name);
    EXPECT_EQ(back[i].category, t.events()[i].category);
    EXPECT_EQ(back[i].action, t.events()[i].action);
    EXPECT_DOUBLE_EQ(back[i].start_us, t.events()[i].start_us);
    EXPECT_DOUBLE_EQ(back[i].end_us, t.events()[i].end_us);
    EXPECT_EQ(back[i].bytes, t.events()[i].bytes);
    EXPECT_DOUBLE_EQ(back[i].waited_us, t.events()[i].waited_us);
    EXPECT_DOUBLE_EQ(back[i].ready_us, t.events()[i].ready_us);
  }
  EXPECT_DOUBLE_EQ(back[0].busy_us(), 9);
  t.clear();
  EXPECT_TRUE(t.events().empty());
}

}  // namespace
}  // namespace hp::runtime
