// DualPipeV through the schedule engine: the overlapped pair's text form and
// validation, the generator against PyTorch's ScheduleDualPipeV rank by rank,
// the pair's messages (receives before it, sends after it), every layout's
// validation and CSV round trip, the refusals, and the simulated bubble
// against DualPipe's (PP-1)(F&B + B - 3W) with F&B = F + B (one thread runs
// the pair's two halves one after the other).
#include <gtest/gtest.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "hand_schedules.hpp"
#include "schedule/generate.hpp"
#include "schedule/schedule_io.hpp"
#include "schedule/simulate.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

using testing::compute_text;
using testing::from_text;
using testing::layout;

TEST(OverlappedPair, TextRoundTripsAsOneToken) {
  std::vector<Action> got;
  ASSERT_TRUE(parse_actions("(1F1;2B0)", got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (Action{ActionType::FWD, 1, 1, -1, true}));
  EXPECT_EQ(got[1], (Action{ActionType::BWD, 2, 0, -1}));
  EXPECT_EQ(format_actions(got), std::vector<std::string>{"(1F1;2B0)"});
  // A forward alone is no pair, and parse_actions takes plain tokens too.
  ASSERT_TRUE(parse_actions("3I1", got));
  EXPECT_EQ(format_actions(got), (std::vector<std::string>{"(1F1;2B0)", "3I1"}));
  for (const char* bad : {"(1B0;2F1)", "(1F1;2W0)", "(1F1;2B0", "(1F1)", "(1F1;2X0)", "(1SEND_F0@2;2B0)"}) {
    std::string err;
    std::vector<Action> out;
    EXPECT_FALSE(parse_actions(bad, out, &err)) << bad;
    EXPECT_TRUE(out.empty()) << bad;
    EXPECT_NE(err.find("bad"), std::string::npos) << bad << ": " << err;
  }
}

// A pair whose forward's send moved between its halves, and a forward marked
// overlapped with a send after it, are each refused at the forward.
TEST(OverlappedPair, ValidationWantsTheBackwardRightAfterTheForward) {
  const Schedule good = generate(layout(ScheduleKind::DualPipeV, 2, 2, 4));
  ASSERT_TRUE(validate(good).ok()) << validate(good).to_string();
  const std::string want = ": an overlapped forward must be followed at once by a backward (B or I) of this rank";
  // Rank 0's (0F3;3B1): the send of 0F3 to rank 1 moves between the halves.
  Schedule moved = good;
  auto& list = moved.ranks[0];
  const Action f{ActionType::FWD, 0, 3, -1, true}, send{ActionType::SEND_F, 0, 3, 1};
  const int p = testing::position(list, f), q = testing::position(list, send);
  ASSERT_GE(p, 0);
  ASSERT_GT(q, p + 1);
  list.erase(list.begin() + q);
  list.insert(list.begin() + p + 1, send);
  std::string issues = validate(moved).to_string();
  EXPECT_NE(issues.find("rank 0 position " + std::to_string(p) + " (0F3)" + want), std::string::npos) << issues;
  // Rank 0's first forward, followed by its send.
  Schedule marked = good;
  ASSERT_EQ(format_action(marked.ranks[0][1]), "0SEND_F0@1");
  marked.ranks[0][0].overlap = true;
  issues = validate(marked).to_string();
  EXPECT_NE(issues.find("(0F0)" + want), std::string::npos) << issues;
}

// Worked from PyTorch's ScheduleDualPipeV._calculate_single_rank_operations
// (torch/distributed/pipelining/schedules.py), rank by rank; its overlapped
// actions written as pairs.
struct PinnedV {
  int pp, mb;
  std::vector<std::string> ranks;
};

const std::vector<PinnedV> kDualPipeVOrders = {
    {4, 10,
     {"0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 (0F7;7B3) (7F4;0B0) (0F8;7B4) (7F5;0B1) "
      "(0F9;7B5) (7F6;0B2) 7B6 (7F7;0B3) 7B7 (7F8;0B4) 7B8 (7F9;0B5) 7B9 0I6 0W6 0I7 0W7 0I8 0W8 0I9 0W9",
      "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 (1F6;6B2) (6F4;1B0) (1F7;6B3) (6F5;1B1) (1F8;6B4) "
      "(6F6;1B2) (1F9;6B5) (6F7;1B3) 6B6 (6F8;1B4) 6B7 (6F9;1B5) 6B8 1B6 6I9 1I7 6W9 1I8 1W7 1I9 1W8 1W9",
      "2F0 2F1 2F2 5F0 2F3 5F1 2F4 5F2 5I0 5W0 5F3 (2F5;5B1) (5F4;2B0) (2F6;5B2) (5F5;2B1) (2F7;5B3) (5F6;2B2) "
      "(2F8;5B4) (5F7;2B3) (2F9;5B5) (5F8;2B4) 5B6 (5F9;2B5) 5B7 2B6 5B8 2I7 5I9 2I8 2W7 2I9 5W9 2W8 2W9",
      "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 3F4 4B0 (4F4;3B0) (3F5;4B1) (4F5;3B1) (3F6;4B2) (4F6;3B2) (3F7;4B3) (4F7;3B3) "
      "(3F8;4B4) (4F8;3B4) (3F9;4B5) (4F9;3B5) 4B6 3B6 4B7 3B7 4I8 3I8 4I9 3I9 4W8 3W8 4W9 3W9"}},
    {3, 7,
     {"0F0 0F1 0F2 0F3 0F4 5F0 5I0 5W0 5F1 5I1 5W1 5F2 (0F5;5B2) (5F3;0B0) (0F6;5B3) (5F4;0B1) 5B4 (5F5;0B2) 5B5 "
      "(5F6;0B3) 5B6 0I4 0W4 0I5 0W5 0I6 0W6",
      "1F0 1F1 1F2 4F0 1F3 4F1 4I0 4W0 4F2 (1F4;4B1) (4F3;1B0) (1F5;4B2) (4F4;1B1) (1F6;4B3) (4F5;1B2) 4B4 (4F6;1B3) "
      "4B5 1B4 4I6 1I5 4W6 1I6 1W5 1W6",
      "2F0 3F0 2F1 3F1 2F2 3F2 2F3 3B0 (3F3;2B0) (2F4;3B1) (3F4;2B1) (2F5;3B2) (3F5;2B2) (2F6;3B3) (3F6;2B3) 3B4 2B4 "
      "3B5 2I5 3I6 2I6 2W5 3W6 2W6"}},
    {2, 4,
     {"0F0 0F1 0F2 3F0 3I0 3W0 3F1 (0F3;3B1) (3F2;0B0) 3B2 (3F3;0B1) 3B3 0I2 0W2 0I3 0W3",
      "1F0 2F0 1F1 2F1 1F2 2B0 (2F2;1B0) (1F3;2B1) (2F3;1B1) 2B2 1B2 2I3 1I3 2W3 1W3"}},
};

TEST(DualPipeV, OrdersArePyTorchsRankByRank) {
  for (const PinnedV& p : kDualPipeVOrders) {
    const Schedule s = generate(layout(ScheduleKind::DualPipeV, p.pp, 2, p.mb));
    EXPECT_EQ(compute_text(s), p.ranks) << "pp " << p.pp << " mb " << p.mb;
  }
}

// Each pair's two receives come before it and its two sends after it, so the
// runtime has both inputs when it starts the pair and nothing between the halves.
TEST(DualPipeV, APairsMessagesSurroundIt) {
  const Schedule s = generate(layout(ScheduleKind::DualPipeV, 4, 2, 10));
  int pairs = 0;
  for (int r = 0; r < 4; ++r) {
    const auto& list = s.ranks[r];
    for (size_t p = 0; p + 1 < list.size(); ++p) {
      if (!list[p].overlap) continue;
      ++pairs;
      const Action& f = list[p];
      const Action& b = list[p + 1];
      EXPECT_EQ(b.type, ActionType::BWD) << "rank " << r << " " << format_action(f);
      for (const Action& a : {f, b}) {
        const bool fwd = a.type == ActionType::FWD;
        const int from = fwd ? a.stage - 1 : a.stage + 1, to = fwd ? a.stage + 1 : a.stage - 1;
        const ActionType recv = fwd ? ActionType::RECV_F : ActionType::RECV_B, send = fwd ? ActionType::SEND_F : ActionType::SEND_B;
        if (from >= 0 && from < 8 && s.options.rank_of(from) != r) {
          EXPECT_LT(testing::position(list, Action{recv, a.stage, a.micro, s.options.rank_of(from)}), static_cast<int>(p))
              << "rank " << r << " " << format_action(a);
        }
        if (to >= 0 && to < 8 && s.options.rank_of(to) != r) {
          EXPECT_GT(testing::position(list, Action{send, a.stage, a.micro, s.options.rank_of(to)}), static_cast<int>(p + 1))
              << "rank " << r << " " << format_action(a);
        }
      }
    }
  }
  // Rank r runs 2(MB - 2PP + r + 1) + PP - 1 - r pairs, less the last rank's first.
  EXPECT_EQ(pairs, (2 * 3 + 3) + (2 * 4 + 2) + (2 * 5 + 1) + (2 * 6 - 1));
}

TEST(DualPipeV, EveryLayoutValidatesSimulatesAndRoundTrips) {
  for (int pp = 1; pp <= 6; ++pp)
    for (int mb = 2 * pp; mb <= 3 * pp + 1; ++mb)
      for (bool forward_only : {false, true}) {
        ScheduleOptions o = layout(ScheduleKind::DualPipeV, pp, 2, mb);
        o.forward_only = forward_only;
        const std::string where = "pp " + std::to_string(pp) + " mb " + std::to_string(mb) + " forward-only " +
                                  std::to_string(forward_only);
        const Schedule s = generate(o);
        const auto v = validate(s);
        ASSERT_TRUE(v.ok()) << where << "\n" << v.to_string();
        EXPECT_GT(simulate(s, CostModel{}).step_time, 0) << where;
        const Schedule back = from_csv(to_csv(s));
        EXPECT_EQ(back.ranks, s.ranks) << where;
        EXPECT_EQ(hp::schedule::from_text(to_text(s)).ranks, s.ranks) << where;
        if (!forward_only && pp > 1) {
          EXPECT_EQ(back.options.kind, ScheduleKind::DualPipeV) << where;
        }
        for (const auto& rank : s.ranks)
          for (const Action& a : rank) EXPECT_FALSE(forward_only && a.overlap) << where;
      }
}

// DualPipe's table (B = I + W the full backward, F&B an overlapped pair):
// DualPipeV idles (S/2 - 1)(F&B + B - 3W) a rank with S = 2 PP stages. Run on
// one thread, F&B = F + B. The table assumes a forward no longer than an input
// backward; a longer one lengthens the warm-up's critical path by F - I on
// each of the PP - 1 ranks it crosses. The busiest rank computes 2 MB (F + B)
// beside the bubble.
TEST(DualPipeV, TheSimulatedBubbleIsDualPipes) {
  for (auto [f, i, w] : std::vector<std::array<double, 3>>{{1, 1, 1}, {1, 2, 0.5}, {0.5, 1, 1}, {2, 1.5, 1}}) {
    CostModel c;
    c.f = f, c.i = i, c.w = w, c.b = i + w;
    for (int pp : {2, 3, 4})
      for (int mb : {2 * pp, 3 * pp + 1}) {
        const double b = i + w, fb = f + b, longer_forward = f > i ? f - i : 0;
        const SimulationReport r = simulate(generate(layout(ScheduleKind::DualPipeV, pp, 2, mb)), c);
        EXPECT_DOUBLE_EQ(r.step_time, 2 * mb * (f + b) + (pp - 1) * (fb + b - 3 * w + longer_forward))
            << "F " << f << " I " << i << " W " << w << " pp " << pp << " mb " << mb;
      }
  }
}

TEST(DualPipeV, FewerMicroBatchesThanStagesOrOtherChunkCountsAreRefusedInOneLine) {
  auto refusal = [](int pp, int v, int mb) {
    try {
      generate(layout(ScheduleKind::DualPipeV, pp, v, mb));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal(4, 2, 7),
            "schedule.kind dualpipev needs schedule.micro_batches >= 2 x schedule.pp = 8 (one per stage; got "
            "schedule.micro_batches 7); use more micro-batches, or schedule.kind zbv, which takes any");
  EXPECT_EQ(refusal(4, 1, 8),
            "schedule.kind dualpipev runs two chunks per rank in V placement (rank r holds stages r and 2 x schedule.pp - "
            "1 - r): use schedule.vpp 2 (got schedule.vpp 1)");
  EXPECT_EQ(refusal(4, 2, 8), "accepted");
}

}  // namespace
}  // namespace hp::schedule
