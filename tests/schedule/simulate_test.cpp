#include "schedule/simulate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "hand_schedules.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

using testing::from_text;
using testing::hand_1f1b;
using testing::hand_gpipe;
using testing::hand_pipeline;
using testing::layout;
using testing::uniform;

// PP=2, MB=2 MPipe: rank 1 transposes micro 1 and ships output and input.
const std::vector<std::string> kMPipe = {
    "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_FWD_RECV1@1 0MPIPE_GRAPH_RECV1@1 "
    "0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0MPIPE_TRANSPOSE_BWD0 0RECV_B1@1 0B1 0MPIPE_TRANSPOSE_BWD1",
    "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 0MPIPE_GRAPH_SEND1@0 "
    "1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0",
};

TEST(SimulateTest, HandOneFOneBMatchesTextbook) {
  for (int pp : {1, 2, 3, 4, 8})
    for (int mb : {pp, pp + 1, 2 * pp, 3 * pp + 1})
      for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{1.5, 2.5}, std::pair{2.0, 1.0}}) {
        const SimulationReport r = simulate(hand_1f1b(pp, mb), uniform(f, b));
        EXPECT_DOUBLE_EQ(r.step_time, (mb + pp - 1) * (f + b)) << "pp " << pp << " mb " << mb << " f " << f;
      }
}

// Forward-only: (MB + PP - 1) forwards long, one activation alive at a time.
TEST(SimulateTest, ForwardOnlyTakesMbPlusPpMinusOneForwards) {
  for (int pp : {1, 2, 4})
    for (int mb : {1, pp, 2 * pp + 1}) {
      ScheduleOptions o;
      o.kind = pp == 1 ? ScheduleKind::NoPipelining : ScheduleKind::OneFOneB;
      o.pp = pp;
      o.micro_batches = mb;
      o.forward_only = true;
      const SimulationReport r = simulate(generate(o), uniform(1.5, 2.0));
      EXPECT_DOUBLE_EQ(r.step_time, (mb + pp - 1) * 1.5) << "pp " << pp << " mb " << mb;
      for (const RankReport& rr : r.ranks) EXPECT_EQ(rr.peak_activations, 1);
    }
}

TEST(SimulateTest, HandGPipeMatchesTextbook) {
  for (int pp : {1, 2, 4, 8})
    for (int mb : {1, pp, 2 * pp + 1}) {
      const SimulationReport r = simulate(hand_gpipe(pp, mb), uniform(1.0, 2.0));
      EXPECT_DOUBLE_EQ(r.step_time, (mb + pp - 1) * 3.0) << "pp " << pp << " mb " << mb;
    }
}

TEST(SimulateTest, BusyIdleAndBubbleFraction) {
  const int pp = 4, mb = 8;
  const SimulationReport r = simulate(hand_1f1b(pp, mb), uniform(1.0, 2.0));
  ASSERT_EQ(r.ranks.size(), 4u);
  for (const RankReport& rr : r.ranks) {
    EXPECT_DOUBLE_EQ(rr.busy, mb * 3.0);
    EXPECT_DOUBLE_EQ(rr.idle, (pp - 1) * 3.0);
  }
  EXPECT_DOUBLE_EQ(r.bubble_fraction, (pp - 1.0) / (mb + pp - 1.0));
}

TEST(SimulateTest, PeakActivations) {
  for (int pp : {2, 4, 8})
    for (int mb : {1, pp / 2, pp, 3 * pp}) {
      const SimulationReport one = simulate(hand_1f1b(pp, mb), uniform(1.0, 2.0));
      const SimulationReport all = simulate(hand_gpipe(pp, mb), uniform(1.0, 2.0));
      for (int r = 0; r < pp; ++r) {
        EXPECT_EQ(one.ranks[r].peak_activations, std::min(pp - r, mb)) << "pp " << pp << " mb " << mb << " rank " << r;
        EXPECT_EQ(all.ranks[r].peak_activations, mb);
      }
    }
}

TEST(SimulateTest, PerStageOverride) {
  CostModel c = uniform(1.0, 2.0);
  c.per_stage[1] = {3.0, 6.0};
  EXPECT_DOUBLE_EQ(c.stage(0).f, 1.0);
  EXPECT_DOUBLE_EQ(c.stage(1).b, 6.0);
  // Rank 1: F0 [1,4] B0 [4,10] F1 [10,13] B1 [13,19]; rank 0: B0 [10,12] B1 [19,21].
  const SimulationReport r = simulate(hand_1f1b(2, 2), c);
  EXPECT_DOUBLE_EQ(r.step_time, 21.0);
  EXPECT_DOUBLE_EQ(r.ranks[1].busy, 18.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].idle, 21.0 - 6.0);
}

TEST(SimulateTest, LatencyAndBandwidthShiftEveryHop) {
  // One micro crosses PP-1 edges forward and PP-1 back.
  for (int pp : {2, 3, 5}) {
    CostModel c = uniform(1.0, 2.0);
    c.p2p_latency = 0.5;
    EXPECT_DOUBLE_EQ(simulate(hand_1f1b(pp, 1), c).step_time, pp * 3.0 + 2 * (pp - 1) * 0.5);
    c.activation_bytes = 10;
    c.p2p_bw = 4;
    EXPECT_DOUBLE_EQ(simulate(hand_1f1b(pp, 1), c).step_time, pp * 3.0 + 2 * (pp - 1) * 3.0);
  }
}

TEST(SimulateTest, PreprocessIsPartOfStageZeroWithoutMPipe) {
  CostModel c = uniform(1.0, 2.0);
  c.pre_f = 0.5;
  c.pre_b = 0.25;
  EXPECT_DOUBLE_EQ(simulate(hand_1f1b(1, 3), c).step_time, 3 * 3.75);
  // Only stage 0 grows: PP=2, MB=1 is F0 1.5, F1 1, B1 2, B0 2.25.
  EXPECT_DOUBLE_EQ(simulate(hand_1f1b(2, 1), c).step_time, 6.75);
}

TEST(SimulateTest, HandMPipeCosts) {
  const Schedule s = from_text(2, 2, kMPipe);
  ASSERT_TRUE(validate(s).ok()) << validate(s).to_string();
  CostModel c = uniform(1.0, 2.0);
  c.pre_f = 0.5;
  c.pre_b = 0.25;
  // Rank 0: TF0 [0,.5] F0 [.5,1.5] F1 [1.5,2.5] B0 [4.5,6.5] TB0 [6.5,6.75] B1 [7.5,9.5]
  // TB1 [9.5,10.25] (pre_b + recompute = pre_f: micro 1 came from rank 1).
  SimulationReport r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_time, 10.25);
  EXPECT_DOUBLE_EQ(r.ranks[0].busy, 0.5 + 1 + 1 + 2 + 0.25 + 2 + 0.75);
  EXPECT_DOUBLE_EQ(r.ranks[1].busy, 0.5 + 6);
  c.recompute = 3.0;
  EXPECT_DOUBLE_EQ(simulate(s, c).step_time, 9.5 + 3.25);
  c.recompute = -1;
  // The broadcast opens the step on every rank and shifts everything.
  c.broadcast_bytes = 100;
  c.broadcast_bw = 50;
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_time, 12.25);
  EXPECT_DOUBLE_EQ(r.ranks[1].busy, 2 + 0.5 + 6);
  // A frozen preprocess broadcasts nothing per step.
  Schedule frozen = s;
  frozen.options.mpipe.frozen_preprocess = true;
  EXPECT_DOUBLE_EQ(simulate(frozen, c).step_time, 10.25);
  // The graph transfer is what TRANSPOSE_BWD1 waits on when it is slow.
  c.broadcast_bytes = 0;
  c.p2p_bw = 1;
  c.preprocess_input_bytes = 20;  // GRAPH_SEND1 arrives at 20.5, F0 starts then, not at 0.5
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_time, 20.5 + (10.25 - 0.5));
}

TEST(SimulateTest, OwnerBackwardAndReduce) {
  const Schedule s = testing::owner_backward_pp2();
  ASSERT_TRUE(validate(s).ok()) << validate(s).to_string();
  CostModel c = uniform(1.0, 2.0);
  c.pre_f = 0.5;
  c.pre_b = 0.25;
  // Rank 0's B1 ends at 9.5; rank 1 backprops micro 1's preprocess [9.5, 9.75].
  SimulationReport r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_time, 9.75);
  const TimedAction& grad = r.ranks[1].timeline[11];
  EXPECT_EQ(grad.action.type, ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD);
  EXPECT_DOUBLE_EQ(grad.start, 9.5);
  EXPECT_DOUBLE_EQ(grad.end, 9.75);
  // Broadcast and reduce cost 2 each.
  c.broadcast_bytes = 100;
  c.broadcast_bw = 50;
  r = simulate(s, c);
  EXPECT_DOUBLE_EQ(r.step_time, 2 + 9.75 + 2);
  EXPECT_DOUBLE_EQ(r.ranks[0].timeline.back().start, 11.75);
  EXPECT_DOUBLE_EQ(r.ranks[1].busy, 2 + 0.5 + 6 + 0.25 + 2);
}

TEST(SimulateTest, TimelineListsEveryAction) {
  CostModel c = uniform(1.0, 2.0);
  c.p2p_latency = 0.25;
  const Schedule s = hand_1f1b(3, 4);
  const SimulationReport r = simulate(s, c);
  for (int rank = 0; rank < 3; ++rank) {
    const auto& tl = r.ranks[rank].timeline;
    ASSERT_EQ(tl.size(), s.ranks[rank].size());
    double prev_end = 0;
    for (size_t i = 0; i < tl.size(); ++i) {
      EXPECT_EQ(tl[i].action, s.ranks[rank][i]);
      EXPECT_GE(tl[i].start, prev_end);  // in program order, never overlapping
      const double len = tl[i].end - tl[i].start;
      EXPECT_DOUBLE_EQ(len, is_compute(tl[i].action.type) ? (tl[i].action.type == ActionType::FWD ? 1.0 : 2.0) : 0.0);
      prev_end = tl[i].end;
    }
  }
  // Rank 1's first receive completes when rank 0's first send lands.
  EXPECT_EQ(r.ranks[1].timeline[0].action, (Action{ActionType::RECV_F, 1, 0, 0}));
  EXPECT_DOUBLE_EQ(r.ranks[1].timeline[0].start, 1.25);
}

TEST(SimulateTest, ThrowsOnDeadlock) {
  // Each rank's receive waits for a send the other posts only afterwards.
  const Schedule s = from_text(2, 2, {
                                         "0F0 0SEND_F0@1 0F1 0RECV_B0@1 0B0 0SEND_F1@1 0RECV_B1@1 0B1",
                                         "1RECV_F0@0 1F0 1RECV_F1@0 1F1 1B0 1SEND_B0@0 1B1 1SEND_B1@0",
                                     });
  try {
    simulate(s, uniform(1, 2));
    FAIL() << "expected a deadlock";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 position 3 (0RECV_B0@1) waits for rank 1"), std::string::npos)
        << e.what();
  }
  // A receive nobody sends.
  Schedule lone = hand_1f1b(2, 1);
  lone.ranks[0].erase(lone.ranks[0].begin() + 1);  // 0SEND_F0@1
  EXPECT_THROW(simulate(lone, uniform(1, 2)), std::invalid_argument);
  // A collective one rank never joins.
  Schedule coll = from_text(2, 2, kMPipe);
  coll.ranks[1].erase(coll.ranks[1].begin());
  EXPECT_THROW(simulate(coll, uniform(1, 2)), std::invalid_argument);
}

std::string simulate_error(const Schedule& s) {
  try {
    simulate(s, uniform(1, 2));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(SimulateTest, NamesAnUnpairedChannel) {
  Schedule s = hand_1f1b(2, 2);
  s.ranks[0].erase(std::find(s.ranks[0].begin(), s.ranks[0].end(), Action{ActionType::SEND_F, 0, 1, 1}));
  EXPECT_EQ(simulate_error(s),
            "schedule cannot run: rank 0 posts 1 sends to rank 1, which posts 2 receives from it "
            "(validate() gives a full report)");
}

TEST(SimulateTest, NamesAFifoMismatch) {
  // Rank 1 takes a gradient where rank 0's activation arrives.
  Schedule s = hand_1f1b(2, 1);
  s.ranks[1][0] = Action{ActionType::RECV_B, 1, 0, 0};
  EXPECT_EQ(simulate_error(s),
            "schedule cannot run: rank 0 position 1 (0SEND_F0@1) meets rank 1 position 0 (1RECV_B0@0) in FIFO order "
            "(validate() gives a full report)");
}

TEST(SimulateTest, PairsEachChannelInOrder) {
  // Three ranks, two chunks: every rank talks to both neighbours, and the
  // wrap-around channels carry several messages each. A receive takes the
  // send its channel delivers, whatever the order ranks run in.
  const Schedule s = generate(layout(ScheduleKind::Interleaved, 3, 2, 5));
  CostModel c = uniform(1, 2);
  c.p2p_latency = 0.5;
  const SimulationReport r = simulate(s, c);
  for (int rank = 0; rank < 3; ++rank)
    for (const TimedAction& t : r.ranks[rank].timeline) {
      if (!is_recv(t.action.type)) continue;
      // The matching send's entry on the peer: same message, posted at its start.
      const Action& a = t.action;
      const int from_stage = a.type == ActionType::RECV_F ? a.stage - 1 : a.stage + 1;
      const Action send{matching_p2p(a.type), from_stage, a.micro, rank};
      const auto& peer = r.ranks[a.peer].timeline;
      const auto it = std::find_if(peer.begin(), peer.end(), [&](const TimedAction& x) { return x.action == send; });
      ASSERT_NE(it, peer.end()) << format_action(send);
      EXPECT_GE(t.start, it->start + 0.5) << format_action(a);
    }
}

TEST(SimulateTest, BatchPostsItsSendsTogether) {
  // Rank 0 lists RECV_B0 before SEND_F0 in one batch: the send still leaves
  // when the batch starts, as it does under validation's model.
  const Schedule s = from_text(2, 1, {"0F0 0RECV_B0@1 0SEND_F0@1 0B0", "1RECV_F0@0 1F0 1B0 1SEND_B0@0"});
  ASSERT_TRUE(validate(s).ok()) << validate(s).to_string();
  const SimulationReport r = simulate(s, uniform(1, 2));
  EXPECT_DOUBLE_EQ(r.step_time, 6.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].timeline[2].start, 1.0);  // the send, posted with the batch
  EXPECT_DOUBLE_EQ(r.ranks[0].timeline[1].end, 4.0);    // the receive, waiting for 1B0
  // The same for a collective listed after a receive of its batch.
  const Schedule c = from_text(2, 1,
                               {"0MPIPE_TRANSPOSE_FWD0 0MPIPE_PARAM_BROADCAST 0F0 0SEND_F0@1 0RECV_B0@1 0B0",
                                "1RECV_F0@0 0MPIPE_PARAM_BROADCAST 1F0 1B0 1SEND_B0@0"});
  ASSERT_TRUE(validate(c).ok()) << validate(c).to_string();
  EXPECT_DOUBLE_EQ(simulate(c, uniform(1, 2)).step_time, 6.0);
}

TEST(SimulateTest, SendsAreEager) {
  // Rendezvous deadlocks here (see ValidateTest.RendezvousBlocksALoneSend);
  // the cost model posts sends without waiting, so it runs.
  const Schedule s = from_text(
      2, 4,
      {
          "0MPIPE_TRANSPOSE_FWD0 0F0 0SEND_F0@1 0MPIPE_TRANSPOSE_FWD2 0MPIPE_FWD_RECV1@1 0MPIPE_FWD_RECV3@1 0F1 "
          "0SEND_F1@1 0RECV_B0@1 0B0 0F2 0SEND_F2@1 0RECV_B1@1 0B1 0F3 0SEND_F3@1 0RECV_B2@1 0B2 0RECV_B3@1 0B3",
          "0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 0MPIPE_TRANSPOSE_FWD3 0MPIPE_FWD_SEND3@0 "
          "1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0 "
          "1RECV_F2@0 1F2 1B2 1SEND_B2@0 1RECV_F3@0 1F3 1B3 1SEND_B3@0",
      });
  EXPECT_FALSE(validate(s).ok());
  // By hand, f 1, b 2: the transposes cost nothing (pre_f 0) and messages take no time. Rank 1
  // posts MPIPE_FWD_SEND1 and 3 at 0 and goes on to RECV_F0 without waiting for rank 0 (which
  // takes them at 1, after F0 0-1 and its lone SEND_F0: under rendezvous each would wait for the
  // other). Then it is 1F1B's steady state, each receive at its send:
  //   rank 1: F0 1-2, B0 2-4, F1 4-5, B1 5-7, F2 7-8, B2 8-10, F3 10-11, B3 11-13;
  //   rank 0: F1 1-2, B0 4-6, F2 6-7, B1 7-9, F3 9-10, B2 10-12, B3 13-15;
  // so the step is (MB + PP - 1)(f + b) = 5 x 3 = 15.
  EXPECT_DOUBLE_EQ(simulate(s, uniform(1, 2)).step_time, 15.0);
}

// --- Generated schedules -------------------------------------------------

TEST(SimulateGeneratedTest, OneFOneBAndGPipeMatchTextbook) {
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe})
    for (int pp : {1, 2, 3, 4, 8})
      for (int mb : {pp, pp + 1, 2 * pp, 4 * pp + 3}) {
        const Schedule s = generate(layout(kind, pp, 1, mb));
        ASSERT_TRUE(validate(s).ok()) << validate(s).to_string();
        for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{1.0, 1.0}, std::pair{3.0, 1.0}})
          EXPECT_DOUBLE_EQ(simulate(s, uniform(f, b)).step_time, (mb + pp - 1) * (f + b))
              << kind_name(kind) << " pp " << pp << " mb " << mb << " f " << f << " b " << b;
      }
}

TEST(SimulateGeneratedTest, NoPipeliningIsSerial) {
  const Schedule s = generate(layout(ScheduleKind::NoPipelining, 1, 1, 5));
  EXPECT_DOUBLE_EQ(simulate(s, uniform(1.0, 2.0)).step_time, 15.0);
  EXPECT_DOUBLE_EQ(simulate(s, uniform(1.0, 2.0)).bubble_fraction, 0.0);
}

// Each receive right before its consumer, each send right after its producer:
// what an eager runtime needs, though not always rendezvous-safe.
Schedule with_adjacent_comms(const ScheduleOptions& o, const std::vector<std::vector<Action>>& compute) {
  Schedule s;
  s.options = o;
  s.ranks.resize(o.pp);
  const int last = o.num_stages() - 1;
  auto rank = [&](int stage) { return stage % o.pp; };
  for (int r = 0; r < o.pp; ++r)
    for (const Action& a : compute[r]) {
      auto& out = s.ranks[r];
      const int st = a.stage, m = a.micro;
      const bool fwd = a.type == ActionType::FWD;
      const int from = fwd ? st - 1 : st + 1, to = fwd ? st + 1 : st - 1;
      if (from >= 0 && from <= last && rank(from) != r)
        out.push_back({fwd ? ActionType::RECV_F : ActionType::RECV_B, st, m, rank(from)});
      out.push_back(a);
      if (to >= 0 && to <= last && rank(to) != r)
        out.push_back({fwd ? ActionType::SEND_F : ActionType::SEND_B, st, m, rank(to)});
    }
  return s;
}

double interleaved_textbook(int pp, int v, int mb, double f, double b) {
  // Bubble (PP-1)(F+B)/v with F = v*f: step = MB*v*(f+b) + (PP-1)(f+b).
  return mb * v * (f + b) + (pp - 1) * (f + b);
}

TEST(SimulateGeneratedTest, InterleavedComputeOrderMatchesTextbook) {
  for (int pp : {2, 4, 8})
    for (int v : {2, 3, 4})
      for (int k : {1, 2, 3}) {
        const ScheduleOptions o = layout(ScheduleKind::Interleaved, pp, v, k * pp);
        const Schedule s = with_adjacent_comms(o, body_compute_order(o));
        for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{1.0, 1.0}, std::pair{2.0, 1.0}, std::pair{1.0, 3.0}}) {
          const SimulationReport r = simulate(s, uniform(f, b));
          EXPECT_DOUBLE_EQ(r.step_time, interleaved_textbook(pp, v, k * pp, f, b))
              << "pp " << pp << " v " << v << " mb " << k * pp << " f " << f << " b " << b;
          EXPECT_NEAR(r.bubble_fraction, (pp - 1.0) / (k * pp * v + pp - 1.0), 1e-12);
        }
      }
}

TEST(SimulateGeneratedTest, GeneratedInterleavedMatchesTextbook) {
  // The generator pulls some receives early for rendezvous safety, into the
  // batch of an earlier send; batches post their sends together, so this
  // costs nothing and the textbook step holds for any f : b.
  for (int pp : {2, 4, 8})
    for (int v : {2, 3, 4})
      for (int k : {1, 2, 3}) {
        const int mb = k * pp;
        const Schedule s = generate(layout(ScheduleKind::Interleaved, pp, v, mb));
        ASSERT_TRUE(validate(s).ok()) << validate(s).to_string();
        for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{1.0, 1.0}, std::pair{2.0, 1.0}, std::pair{1.0, 3.0}})
          EXPECT_DOUBLE_EQ(simulate(s, uniform(f, b)).step_time, interleaved_textbook(pp, v, mb, f, b))
              << "pp " << pp << " v " << v << " mb " << mb << " f " << f << " b " << b;
      }
}

TEST(SimulateGeneratedTest, AcceptedSchedulesAlwaysRun) {
  // Validation and simulation share the batch model, so whatever validate
  // accepts, even a mutated generated schedule, simulates without deadlock.
  std::mt19937 rng(7);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const ScheduleKind kinds[] = {ScheduleKind::MPipe, ScheduleKind::Interleaved, ScheduleKind::OneFOneB};
    ScheduleOptions o = layout(kinds[iter % 3], 2 + rng() % 3, 1, 1 + rng() % 6);
    if (o.kind != ScheduleKind::OneFOneB) o.vpp = 1 + rng() % 2;
    o.mpipe.owner_backward = rng() % 2;
    o.mpipe.overflow = rng() % 2 ? Overflow::Min : Overflow::Full;
    Schedule s = generate(o);
    auto& lst = s.ranks[rng() % s.ranks.size()];
    const size_t i = rng() % lst.size();
    switch (rng() % 5) {
      case 0: lst.erase(lst.begin() + i); break;
      case 1: lst.insert(lst.begin() + rng() % lst.size(), lst[i]); break;
      case 2: std::swap(lst[i], lst[(i + 1) % lst.size()]); break;
      case 3: lst[i].peer = static_cast<int>(rng() % 6) - 1; break;
      case 4: lst[i].micro = static_cast<int>(rng() % 8) - 1; break;
    }
    if (!validate(s).ok()) continue;
    ++accepted;
    EXPECT_NO_THROW(simulate(s, uniform(1, 2))) << "iteration " << iter;
  }
  EXPECT_GT(accepted, 100);  // swaps of independent neighbours stay valid
}

TEST(SimulateGeneratedTest, MPipeBroadcastCostAddsToStep) {
  ScheduleOptions o = layout(ScheduleKind::MPipe, 4, 2, 8);
  const Schedule s = generate(o);
  ASSERT_TRUE(validate(s).ok()) << validate(s).to_string();
  CostModel c = uniform(1.0, 2.0);
  c.pre_f = 0.5;
  c.pre_b = 0.5;
  const double base = simulate(s, c).step_time;
  c.broadcast_bytes = 1000;
  c.broadcast_bw = 250;
  EXPECT_DOUBLE_EQ(simulate(s, c).step_time, base + 4.0);
  o.mpipe.frozen_preprocess = true;
  const Schedule frozen = generate(o);
  ASSERT_TRUE(validate(frozen).ok()) << validate(frozen).to_string();
  EXPECT_LE(simulate(frozen, c).step_time, base);
}

TEST(SimulateGeneratedTest, MPipeWithoutPreprocessCostIsTheBody) {
  // With pre_f = pre_b = 0 and free comms, the MPipe steps cost nothing and
  // the step is the interleaved body's.
  for (Overflow ov : {Overflow::Full, Overflow::Min})
    for (int mb : {2, 4, 8, 12}) {
      ScheduleOptions o = layout(ScheduleKind::MPipe, 4, 2, mb);
      o.mpipe.overflow = ov;
      const Schedule s = generate(o);
      ASSERT_TRUE(validate(s).ok()) << validate(s).to_string();
      const Schedule body = generate(layout(ScheduleKind::Interleaved, 4, 2, mb));
      EXPECT_DOUBLE_EQ(simulate(s, uniform(1, 2)).step_time, simulate(body, uniform(1, 2)).step_time)
          << "mb " << mb;
    }
}

TEST(SimulateGeneratedTest, MPipeTransposeShortensWarmup) {
  // A heavy preprocess spread over the idle warmup ranks beats running it
  // serially inside stage 0 (the plain interleaved schedule).
  CostModel c = uniform(1.0, 2.0);
  c.pre_f = 4.0;
  c.pre_b = 1.0;
  ScheduleOptions o = layout(ScheduleKind::MPipe, 8, 1, 8);
  o.mpipe.frozen_preprocess = true;
  const double mpipe = simulate(generate(o), c).step_time;
  const double plain = simulate(generate(layout(ScheduleKind::Interleaved, 8, 1, 8)), c).step_time;
  EXPECT_LT(mpipe, plain);
}

// Linear time, counted in operations (SimulationReport::operations), which a loaded machine
// cannot skew as it does CPU time; bench_schedule's BM_Simulate gives the speed.
TEST(SimulateGeneratedTest, LargeMPipeTakesLinearWork) {
  ScheduleOptions o = layout(ScheduleKind::MPipe, 64, 4, 1024);
  const Schedule s = generate(o);
  std::int64_t actions = 0;
  for (const auto& rank : s.ranks) actions += static_cast<std::int64_t>(rank.size());
  const SimulationReport r = simulate(s, uniform(1.0, 2.0));
  EXPECT_GT(r.step_time, 0);
  // Each action stepped once, and a rank resumed again only for a message or a collective it
  // waits for: at most 3 x actions + 2 x ranks (simulate.hpp).
  EXPECT_GE(r.operations, actions);
  EXPECT_LE(r.operations, 3 * actions + 2 * 64);
}

}  // namespace
}  // namespace hp::schedule
