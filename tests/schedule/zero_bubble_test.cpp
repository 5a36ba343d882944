// The split backward (BWD_I, BWD_W) through the schedule engine: its text
// form, validation's rules for it, the ZB1P generator against PyTorch's
// ScheduleInterleavedZeroBubble rank by rank, and the simulated bubble against
// the zero-bubble paper's (PP-1)(F+B-2W); V placement and the ZBV generator
// against PyTorch's ScheduleZBVZeroBubble.
#include <gtest/gtest.h>

#include <array>
#include <sstream>
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

TEST(SplitBackward, TextRoundTripsAndNamesItsParts) {
  for (const char* tok : {"3I1", "3W1", "0I0", "12W7"}) {
    const auto a = parse_action(tok);
    ASSERT_TRUE(a) << tok;
    EXPECT_EQ(format_action(*a), tok);
  }
  EXPECT_EQ(parse_action("3I1")->type, ActionType::BWD_I);
  EXPECT_EQ(parse_action("3W1")->type, ActionType::BWD_W);
  EXPECT_TRUE(is_input_backward(ActionType::BWD_I));
  EXPECT_FALSE(is_input_backward(ActionType::BWD_W));
  EXPECT_FALSE(is_comm(ActionType::BWD_W));
  std::string err;
  EXPECT_FALSE(parse_action("3W1@0", &err));
  EXPECT_NE(err.find("only sends and receives have a peer"), std::string::npos) << err;
}

// Two ranks, one micro: rank 1 splits its backward, rank 0 runs it whole.
const std::vector<std::string> kSplit = {"0F0 0SEND_F0@1 0RECV_B0@1 0B0", "1RECV_F0@0 1F0 1I0 1SEND_B0@0 1W0"};

TEST(SplitBackward, ValidationAcceptsIThenWOrAWholeBackward) {
  const auto r = validate(from_text(2, 1, kSplit));
  EXPECT_TRUE(r.ok()) << r.to_string();
}

TEST(SplitBackward, ValidationRefusesWBeforeItsIAMissingPartAndBothForms) {
  auto issues = [](const std::vector<std::string>& lines) { return validate(from_text(2, 1, lines)).to_string(); };
  const std::string w_first = issues({kSplit[0], "1RECV_F0@0 1F0 1W0 1I0 1SEND_B0@0"});
  EXPECT_NE(w_first.find("(1W0): needs 1I0 earlier on rank 1, but it comes later"), std::string::npos) << w_first;
  const std::string no_w = issues({kSplit[0], "1RECV_F0@0 1F0 1I0 1SEND_B0@0"});
  EXPECT_NE(no_w.find("stage 1 micro 0 has an input backward (I) but no weight backward (W)"), std::string::npos)
      << no_w;
  const std::string both = issues({kSplit[0], "1RECV_F0@0 1F0 1I0 1SEND_B0@0 1W0 1B0"});
  EXPECT_NE(both.find("the backward also runs split (I and W): run it whole or split, once"), std::string::npos)
      << both;
  const std::string twice = issues({kSplit[0], "1RECV_F0@0 1F0 1I0 1SEND_B0@0 1W0 1W0"});
  EXPECT_NE(twice.find("(1W0): appears twice"), std::string::npos) << twice;
  // The gradient leaves after the I that makes it, not before.
  const std::string early = issues({kSplit[0], "1RECV_F0@0 1F0 1SEND_B0@0 1I0 1W0"});
  EXPECT_NE(early.find("(1SEND_B0@0): needs 1I0 earlier on rank 1"), std::string::npos) << early;
  // The I needs what B needs: its stage's forward and its output's gradient.
  const std::string no_grad = issues({"0F0 0SEND_F0@1 0I0 0RECV_B0@1 0W0", "1RECV_F0@0 1F0 1B0 1SEND_B0@0"});
  EXPECT_NE(no_grad.find("(0I0): needs 0RECV_B0@1 earlier on rank 0"), std::string::npos) << no_grad;
}

// PyTorch's ScheduleInterleavedZeroBubble (torch/distributed/pipelining/
// schedules.py; the PP 2, v 2, MB 8 order is its test artifact
// zb1p_2rank_2stagep_compute.csv), compute actions per rank.
struct Pinned {
  int pp, vpp, mb;
  std::vector<std::string> ranks;
};

const std::vector<Pinned> kPyTorchOrders = {
    {4, 1, 8,
     {"0F0 0F1 0F2 0F3 0I0 0W0 0F4 0I1 0W1 0F5 0I2 0W2 0F6 0I3 0W3 0F7 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7",
      "1F0 1F1 1F2 1I0 1F3 1I1 1W0 1F4 1I2 1W1 1F5 1I3 1W2 1F6 1I4 1W3 1F7 1I5 1W4 1I6 1W5 1I7 1W6 1W7",
      "2F0 2F1 2I0 2F2 2I1 2F3 2I2 2W0 2F4 2I3 2W1 2F5 2I4 2W2 2F6 2I5 2W3 2F7 2I6 2W4 2I7 2W5 2W6 2W7",
      "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 3F6 3I6 3W3 3F7 3I7 3W4 3W5 3W6 3W7"}},
    {4, 1, 3,
     {"0F0 0F1 0F2 0I0 0W0 0I1 0W1 0I2 0W2", "1F0 1F1 1F2 1I0 1I1 1W0 1I2 1W1 1W2",
      "2F0 2F1 2I0 2F2 2I1 2I2 2W0 2W1 2W2", "3F0 3I0 3F1 3I1 3F2 3I2 3W0 3W1 3W2"}},
    {4, 2, 8,
     {"0F0 0F1 0F2 0F3 4F0 4F1 4F2 4F3 4I0 4W0 0F4 4I1 4W1 0F5 4I2 4W2 0F6 4I3 4W3 0F7 0I0 0W0 4F4 0I1 0W1 4F5 0I2 "
      "0W2 4F6 0I3 0W3 4F7 4I4 4W4 4I5 4W5 4I6 4W6 4I7 4W7 0I4 0W4 0I5 0W5 0I6 0W6 0I7 0W7",
      "1F0 1F1 1F2 1F3 5F0 5F1 5F2 5I0 5F3 5I1 5W0 1F4 5I2 5W1 1F5 5I3 5W2 1F6 1I0 5W3 1F7 1I1 1W0 5F4 1I2 1W1 5F5 "
      "1I3 1W2 5F6 5I4 1W3 5F7 5I5 5W4 5I6 5W5 5I7 5W6 1I4 5W7 1I5 1W4 1I6 1W5 1I7 1W6 1W7",
      "2F0 2F1 2F2 2F3 6F0 6F1 6I0 6F2 6I1 6F3 6I2 6W0 2F4 6I3 6W1 2F5 2I0 6W2 2F6 2I1 6W3 2F7 2I2 2W0 6F4 2I3 2W1 "
      "6F5 6I4 2W2 6F6 6I5 2W3 6F7 6I6 6W4 6I7 6W5 2I4 6W6 2I5 6W7 2I6 2W4 2I7 2W5 2W6 2W7",
      "3F0 3F1 3F2 3F3 7F0 7I0 7F1 7I1 7F2 7I2 7F3 7I3 7W0 3F4 3I0 7W1 3F5 3I1 7W2 3F6 3I2 7W3 3F7 3I3 3W0 7F4 7I4 "
      "3W1 7F5 7I5 3W2 7F6 7I6 3W3 7F7 7I7 7W4 3I4 7W5 3I5 7W6 3I6 7W7 3I7 3W4 3W5 3W6 3W7"}},
    {2, 2, 3,
     {"0F0 0F1 0F2 2F0 2F1 2I0 2W0 2F2 2I1 2W1 2I2 2W2 0I0 0W0 0I1 0W1 0I2 0W2",
      "1F0 1F1 1F2 3F0 3I0 3F1 3I1 3W0 3F2 3I2 3W1 1I0 3W2 1I1 1W0 1I2 1W1 1W2"}},
    {2, 2, 8,
     {"0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 2W2 0F4 2I3 2W3 0F5 0I2 0W2 2F4 0I3 0W3 "
      "2F5 2I4 2W4 0F6 2I5 2W5 0F7 0I4 0W4 2F6 0I5 0W5 2F7 2I6 2W6 2I7 2W7 0I6 0W6 0I7 0W7",
      "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 1F4 1I2 3W3 1F5 1I3 1W2 3F4 3I4 "
      "1W3 3F5 3I5 3W4 1F6 1I4 3W5 1F7 1I5 1W4 3F6 3I6 1W5 3F7 3I7 3W6 1I6 3W7 1I7 1W6 1W7"}},
};

TEST(ZeroBubble1P, OrdersArePyTorchsRankByRank) {
  for (const Pinned& p : kPyTorchOrders) {
    const Schedule s = generate(layout(ScheduleKind::ZeroBubble1P, p.pp, p.vpp, p.mb));
    EXPECT_EQ(compute_text(s), p.ranks) << "pp " << p.pp << " v " << p.vpp << " mb " << p.mb;
  }
}

// The schedule and its forward-only variant validate, simulate, and read
// back from CSV as the same actions (and, training, the same kind when
// same_kind: a schedule of one rank cannot show its placement).
void expect_runs_and_reads_back(ScheduleOptions o, bool same_kind) {
  const std::string where = std::string(kind_name(o.kind)) + " pp " + std::to_string(o.pp) + " v " +
                            std::to_string(o.vpp) + " mb " + std::to_string(o.micro_batches);
  for (bool forward_only : {false, true}) {
    o.forward_only = forward_only;
    const Schedule s = generate(o);
    const auto v = validate(s);
    ASSERT_TRUE(v.ok()) << where << " forward-only " << forward_only << "\n" << v.to_string();
    EXPECT_GT(simulate(s, CostModel{}).step_time, 0) << where;
    const Schedule back = from_csv(to_csv(s));
    EXPECT_EQ(back.ranks, s.ranks) << where;
    if (!forward_only && same_kind) {
      EXPECT_EQ(back.options.kind, o.kind) << where;
    }
  }
}

// PyTorch's TestSchedulePlan grid, (chunks per rank, micro-batches, ranks),
// and beyond it every MB from 1 to 3 PP + 1 (below PP, not divisible by PP,
// and those PyTorch refuses for not being a multiple of its rounds): each
// schedule and its forward-only variant validate, simulate, and read back
// from CSV as the same zb1p schedule.
TEST(ZeroBubble1P, EveryLayoutValidatesSimulatesAndRoundTrips) {
  std::vector<ScheduleOptions> layouts;
  for (auto [v, mb, pp] : std::vector<std::array<int, 3>>{
           {2, 2, 2}, {2, 4, 4}, {2, 8, 2}, {2, 8, 4}, {2, 8, 8}, {4, 4, 4}, {4, 8, 4}, {4, 8, 8}, {4, 16, 4},
           {4, 32, 4}, {4, 64, 4}, {4, 16, 16}, {4, 32, 32}, {4, 128, 64}, {3, 2, 2}, {3, 8, 2}, {3, 12, 4},
           {4, 6, 3}, {4, 10, 5}, {2, 3, 4}, {2, 10, 4}, {2, 15, 4}})
    layouts.push_back(layout(ScheduleKind::ZeroBubble1P, pp, v, mb));
  for (int pp = 1; pp <= 5; ++pp)
    for (int v = 1; v <= 3; ++v)
      for (int mb = 1; mb <= 3 * pp + 1; ++mb) layouts.push_back(layout(ScheduleKind::ZeroBubble1P, pp, v, mb));
  for (const ScheduleOptions& o : layouts) expect_runs_and_reads_back(o, true);
}

double step_time(ScheduleKind kind, int pp, int vpp, int mb, const CostModel& c) {
  return simulate(generate(layout(kind, pp, vpp, mb)), c).step_time;
}

// The zero-bubble paper's bubbles (B = I + W the full backward): 1F1B idles
// (PP-1)(F+B) a rank, ZB-H1 (PP-1)(F+B-2W), a third of it when F = I = W.
// The busiest rank computes MB (F+B) beside it.
TEST(ZeroBubble1P, TheSimulatedBubbleIsTheZeroBubblePapers) {
  for (auto [f, i, w] : std::vector<std::array<double, 3>>{{1, 1, 1}, {2, 1.5, 1}, {1, 2, 0.5}}) {
    CostModel c;
    c.f = f;
    c.b = i + w;
    c.i = i;
    c.w = w;
    for (int pp : {2, 4}) {
      const int mb = 2 * pp;
      const double work = mb * (f + i + w);
      EXPECT_DOUBLE_EQ(step_time(ScheduleKind::OneFOneB, pp, 1, mb, c), work + (pp - 1) * (f + i + w));
      EXPECT_DOUBLE_EQ(step_time(ScheduleKind::ZeroBubble1P, pp, 1, mb, c), work + (pp - 1) * (f + i - w))
          << "F " << f << " I " << i << " W " << w << " pp " << pp;
    }
  }
  // Only B given: I and W split it evenly.
  CostModel even;
  even.b = 2;
  EXPECT_DOUBLE_EQ(step_time(ScheduleKind::ZeroBubble1P, 4, 1, 8, even), 8 * 3 + 3 * 1);
}

// A W waits for nothing and frees the activation only when it runs; its I
// frees nothing the memory model counts apart.
TEST(ZeroBubble1P, ActivationsAreHeldUntilTheirW) {
  const SimulationReport one = simulate(generate(layout(ScheduleKind::OneFOneB, 4, 1, 8)), CostModel{});
  const SimulationReport zb = simulate(generate(layout(ScheduleKind::ZeroBubble1P, 4, 1, 8)), CostModel{});
  for (int r = 0; r < 4; ++r) {
    // Rank r holds back the W of its first r I's, so r more activations than 1F1B's PP - r at most.
    EXPECT_EQ(one.ranks[r].peak_activations, 4 - r) << "rank " << r;
    EXPECT_EQ(zb.ranks[r].peak_activations, 4 - r + r) << "rank " << r;
    EXPECT_EQ(zb.ranks[r].peak_awaiting_weight, r + 1) << "rank " << r;
    EXPECT_EQ(one.ranks[r].peak_awaiting_weight, 0);
  }
}

// Rank r holds stages r and 2PP-1-r; loop placement is unchanged.
TEST(VPlacement, RankROwnsStagesRAndTwoPPMinusOneMinusR) {
  const ScheduleOptions v = layout(ScheduleKind::ZeroBubbleV, 4, 2, 8);
  EXPECT_EQ(v.placement(), Placement::V);
  const std::vector<std::array<int, 2>> want = {{0, 7}, {1, 6}, {2, 5}, {3, 4}};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(v.stage_of(r, 0), want[r][0]);
    EXPECT_EQ(v.stage_of(r, 1), want[r][1]);
    for (int c = 0; c < 2; ++c) {
      EXPECT_EQ(v.rank_of(v.stage_of(r, c)), r);
      EXPECT_EQ(v.chunk_of(v.stage_of(r, c)), c);
    }
  }
  const ScheduleOptions loop = layout(ScheduleKind::ZeroBubble1P, 4, 2, 8);
  EXPECT_EQ(loop.placement(), Placement::Loop);
  EXPECT_EQ(loop.stage_of(1, 1), 5);
  EXPECT_EQ(loop.rank_of(5), 1);
}

// The forward turns round on rank PP-1 (stage PP-1 to PP) and the backward
// likewise without a message; every other neighbour pair exchanges one per micro.
TEST(VPlacement, TheTurnRoundOnTheLastRankSendsNothing) {
  const Schedule s = generate(layout(ScheduleKind::ZeroBubbleV, 3, 2, 5));
  int sends = 0;
  for (int r = 0; r < 3; ++r)
    for (const Action& a : s.ranks[r]) {
      if (!is_send(a.type)) continue;
      ++sends;
      EXPECT_EQ(a.peer, s.options.rank_of(a.type == ActionType::SEND_F ? a.stage + 1 : a.stage - 1)) << format_action(a);
      EXPECT_FALSE(a.type == ActionType::SEND_F && a.stage == 2) << format_action(a);
      EXPECT_FALSE(a.type == ActionType::SEND_B && a.stage == 3) << format_action(a);
    }
  // 6 stages, 4 cross-rank boundaries each way, 5 micros.
  EXPECT_EQ(sends, 2 * 4 * 5);
}

// Worked by hand from PyTorch's ScheduleZBVZeroBubble._calculate_single_rank_
// operations: at MB 4 every phase runs; at MB 2 (below its 2PP-1) the actions
// of the micro-batches it plans beyond MB are dropped.
TEST(ZeroBubbleV, OrdersArePyTorchsRankByRank) {
  const std::vector<Pinned> orders = {
      {2, 2, 4,
       {"0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 0I3 0W3",
        "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3"}},
      {2, 2, 2, {"0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1", "1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1"}},
  };
  for (const Pinned& p : orders) {
    const Schedule s = generate(layout(ScheduleKind::ZeroBubbleV, p.pp, p.vpp, p.mb));
    EXPECT_EQ(compute_text(s), p.ranks) << "pp " << p.pp << " mb " << p.mb;
  }
}

TEST(ZeroBubbleV, EveryLayoutValidatesSimulatesAndRoundTrips) {
  for (int pp = 1; pp <= 6; ++pp)
    for (int mb = 1; mb <= 3 * pp + 1; ++mb) expect_runs_and_reads_back(layout(ScheduleKind::ZeroBubbleV, pp, 2, mb), pp > 1);
}

// With F = I = W a chunk, rank r can start only after the r forwards that
// reach it, so no schedule ends before 6 MB + PP - 1 (each rank computes 2
// chunks x MB x (F + I + W)). ZBV meets that bound from MB = 2PP - 1 on (the
// paper's zero bubble), and every rank peaks at 2PP chunk activations: PP
// stages' worth, 1F1B's first rank, and the same on every rank.
TEST(ZeroBubbleV, MeetsTheStartUpBoundWithBalancedMemory) {
  CostModel c;
  c.f = 1, c.i = 1, c.w = 1, c.b = 2;
  for (int pp = 2; pp <= 6; ++pp)
    for (int mb : {2 * pp - 1, 2 * pp, 3 * pp + 1}) {
      const SimulationReport r = simulate(generate(layout(ScheduleKind::ZeroBubbleV, pp, 2, mb)), c);
      EXPECT_DOUBLE_EQ(r.step_time, 6 * mb + pp - 1) << "pp " << pp << " mb " << mb;
      for (int rank = 0; rank < pp; ++rank)
        EXPECT_EQ(r.ranks[rank].peak_activations, 2 * pp) << "pp " << pp << " mb " << mb << " rank " << rank;
    }
}

TEST(ZeroBubbleV, OtherChunkCountsAreRefusedInOneLine) {
  for (int v : {1, 3}) {
    try {
      generate(layout(ScheduleKind::ZeroBubbleV, 4, v, 8));
      ADD_FAILURE() << "zbv accepted schedule.vpp " << v;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                "schedule.kind zbv runs two chunks per rank in V placement (rank r holds stages r and 2 x schedule.pp - 1 "
                "- r): use schedule.vpp 2 (got schedule.vpp " + std::to_string(v) + ")");
    }
  }
}

}  // namespace
}  // namespace hp::schedule
