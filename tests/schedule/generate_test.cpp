#include "schedule/generate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "hand_schedules.hpp"
#include "schedule/body_order.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

using testing::position;
using testing::text;

ScheduleOptions opts(ScheduleKind kind, int pp, int vpp, int mb, int group = 0) {
  ScheduleOptions o = testing::layout(kind, pp, vpp, mb);
  o.group_size = group;
  return o;
}

using testing::rejection;

bool keep_compute(ActionType t) { return is_compute(t); }

int leading_forwards(const std::vector<Action>& ops) {
  int n = 0;
  while (n < static_cast<int>(ops.size()) && ops[n].type == ActionType::FWD) ++n;
  return n;
}

TEST(GenerateOptions, AcceptsTheDefaults) { EXPECT_EQ(rejection(ScheduleOptions{}), ""); }

TEST(GenerateOptions, RejectsBadCountsNamingTheFlag) {
  auto o = ScheduleOptions{};
  o.pp = 0;
  EXPECT_EQ(rejection(o), "schedule.pp must be >= 1, got 0");
  o = ScheduleOptions{};
  o.vpp = 0;
  EXPECT_EQ(rejection(o), "schedule.vpp must be >= 1, got 0");
  o = ScheduleOptions{};
  o.micro_batches = -2;
  EXPECT_EQ(rejection(o), "schedule.micro_batches must be >= 1, got -2");
  o = ScheduleOptions{};
  o.group_size = -1;
  EXPECT_NE(rejection(o).find("schedule.group_size must be >= 1 (or 0 for the default"), std::string::npos);
  o = ScheduleOptions{};
  o.layers = -1;
  EXPECT_NE(rejection(o).find("schedule.layers must be >= 0"), std::string::npos);
}

TEST(GenerateOptions, RejectsKindConstraints) {
  EXPECT_EQ(rejection(opts(ScheduleKind::NoPipelining, 4, 1, 4)),
            "no-pipelining runs one stage: use schedule.pp 1 schedule.vpp 1 (got schedule.pp 4 schedule.vpp 1)");
  EXPECT_NE(rejection(opts(ScheduleKind::NoPipelining, 1, 2, 4)).find("use schedule.pp 1 schedule.vpp 1"), std::string::npos);
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    const std::string msg = rejection(opts(k, 4, 2, 8));
    EXPECT_NE(msg.find("schedule.kind " + std::string(kind_name(k))), std::string::npos) << msg;
    EXPECT_NE(msg.find("use schedule.vpp 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("schedule.kind interleaved"), std::string::npos) << msg;
  }
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 4, 1, 3)), "");
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 1, 3, 3)), "");
}

TEST(GenerateOptions, LayersMustCoverEveryChunk) {
  auto o = opts(ScheduleKind::Interleaved, 4, 2, 8);
  o.layers = 7;
  EXPECT_EQ(rejection(o), "schedule.layers must be >= schedule.pp * schedule.vpp = 8 so every chunk holds a layer, got 7");
  o.layers = 8;
  EXPECT_EQ(rejection(o), "");
  o.layers = 13;  // not a multiple: the first chunks take the remainder
  EXPECT_EQ(rejection(o), "");
}

TEST(GenerateOptions, GroupSizeFollowsMegatronsRule) {
  // Below PP, or leaving a last group shorter than PP: rejected, with a suggestion.
  const std::string msg = rejection(opts(ScheduleKind::Interleaved, 4, 2, 10, 3));
  EXPECT_NE(msg.find("schedule.group_size 3 does not work with schedule.pp 4 schedule.micro_batches 10"), std::string::npos) << msg;
  EXPECT_NE(msg.find("e.g. schedule.group_size 5"), std::string::npos) << msg;
  EXPECT_NE(rejection(opts(ScheduleKind::Interleaved, 4, 2, 9, 4)), "");  // last group of 1
  EXPECT_NE(rejection(opts(ScheduleKind::MPipe, 4, 2, 10, 2)), "");
  // Accepted: a multiple, a last group of >= PP, one group, one chunk, one rank.
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 4, 2, 12, 4)), "");
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 4, 2, 9, 5)), "");
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 4, 2, 10, 10)), "");
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 4, 2, 10, 64)), "");
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 4, 1, 10, 3)), "");
  EXPECT_EQ(rejection(opts(ScheduleKind::Interleaved, 1, 3, 10, 3)), "");
}

TEST(GenerateOptions, DefaultGroupSizeAvoidsShortLastGroups) {
  auto g = [](int pp, int mb) { return opts(ScheduleKind::Interleaved, pp, 2, mb).effective_group_size(); };
  EXPECT_EQ(g(4, 8), 4);
  EXPECT_EQ(g(4, 3), 3);   // MB < PP: one round of all MB (torch's per-round layout)
  EXPECT_EQ(g(4, 10), 5);  // torch's per-round size: 2 rounds of 5
  EXPECT_EQ(g(4, 5), 5);
  EXPECT_EQ(g(4, 9), 5);   // groups 5, 4
  EXPECT_EQ(g(4, 13), 7);  // groups 7, 6
  EXPECT_EQ(g(1, 7), 1);
  EXPECT_EQ(opts(ScheduleKind::Interleaved, 4, 2, 9, 3).effective_group_size(), 3);
}

// PP 4, v 2, MB 3: the round is the 3 micro-batches, so the last rank starts
// its second chunk's 1F1B right after the first chunk's forwards instead of
// holding one more activation.
TEST(GenerateBody, InterleavedWithFewerMicroBatchesThanRanksUsesOneRoundOfThem) {
  const auto s = generate(opts(ScheduleKind::Interleaved, 4, 2, 3));
  std::vector<std::string> compute;
  for (const auto& a : s.ranks[3])
    if (a.type == ActionType::FWD || a.type == ActionType::BWD) compute.push_back(format_action(a));
  const std::vector<std::string> want = {"3F0", "3F1", "3F2", "7F0", "7B0", "7F1", "7B1"};
  ASSERT_GE(compute.size(), want.size());
  EXPECT_EQ(std::vector<std::string>(compute.begin(), compute.begin() + want.size()), want);
}

TEST(GenerateBody, NoPipeliningAlternates) {
  const auto s = generate(opts(ScheduleKind::NoPipelining, 1, 1, 3));
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(text(s.ranks[0]), "0F0 0B0 0F1 0B1 0F2 0B2");
}

TEST(GenerateBody, GPipeRunsAllForwardsThenAllBackwards) {
  const auto s = generate(opts(ScheduleKind::GPipe, 2, 1, 2));
  EXPECT_EQ(text(s.ranks[0]), "0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0RECV_B1@1 0B1");
  EXPECT_EQ(text(s.ranks[1]), "1RECV_F0@0 1F0 1RECV_F1@0 1F1 1B0 1SEND_B0@0 1B1 1SEND_B1@0");
}

// Sends right after their compute, receives right before theirs: the steady
// state batches SEND_F+RECV_B and SEND_B+RECV_F like Megatron's 1F1B.
TEST(GenerateBody, OneFOneBPlacesCommsNaturally) {
  const auto s = generate(opts(ScheduleKind::OneFOneB, 3, 1, 4));
  EXPECT_EQ(text(s.ranks[0]),
            "0F0 0SEND_F0@1 0F1 0SEND_F1@1 0F2 0SEND_F2@1 0RECV_B0@1 0B0 0F3 0SEND_F3@1 0RECV_B1@1 0B1 "
            "0RECV_B2@1 0B2 0RECV_B3@1 0B3");
  EXPECT_EQ(text(s.ranks[1]),
            "1RECV_F0@0 1F0 1SEND_F0@2 1RECV_F1@0 1F1 1SEND_F1@2 1RECV_B0@2 1B0 1SEND_B0@0 1RECV_F2@0 1F2 "
            "1SEND_F2@2 1RECV_B1@2 1B1 1SEND_B1@0 1RECV_F3@0 1F3 1SEND_F3@2 1RECV_B2@2 1B2 1SEND_B2@0 "
            "1RECV_B3@2 1B3 1SEND_B3@0");
  EXPECT_EQ(text(s.ranks[2]),
            "2RECV_F0@1 2F0 2B0 2SEND_B0@1 2RECV_F1@1 2F1 2B1 2SEND_B1@1 2RECV_F2@1 2F2 2B2 2SEND_B2@1 "
            "2RECV_F3@1 2F3 2B3 2SEND_B3@1");
}

TEST(GenerateBody, OneFOneBWarmupCounts) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int mb = 1; mb <= 32; ++mb) {
      const auto order = body_compute_order(opts(ScheduleKind::OneFOneB, pp, 1, mb));
      for (int r = 0; r < pp; ++r) {
        // Warmup min(PP-r-1, MB) forwards, then the first steady forward.
        EXPECT_EQ(leading_forwards(order[r]), std::min(pp - r, mb)) << "pp " << pp << " mb " << mb << " rank " << r;
        EXPECT_EQ(order[r].size(), 2u * mb);
      }
    }
}

TEST(GenerateBody, InterleavedTableIsMegatrons) {
  // Megatron's docstring example: PP2, N3 (group), M5, VP2.
  const std::vector<MicroChunk> want = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1},
                                        {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}};
  EXPECT_EQ(interleaved_table(5, 2, 3), want);
  EXPECT_EQ(interleaved_table(2, 2, 4), (std::vector<MicroChunk>{{0, 0}, {1, 0}, {0, 1}, {1, 1}}));
}

TEST(GenerateBody, InterleavedComputeOrder) {
  const auto order = body_compute_order(opts(ScheduleKind::Interleaved, 2, 2, 4));
  // Rank 0: warmup (2-1)*2 + 2 = 4, rank 1: 2; backward walks the chunks in reverse.
  EXPECT_EQ(text(order[0]), "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
  EXPECT_EQ(text(order[1]), "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3");
}

TEST(GenerateBody, InterleavedWarmupCounts) {
  for (int pp = 1; pp <= 8; ++pp)
    for (int v = 1; v <= 4; ++v)
      for (int mb = 1; mb <= 32; ++mb) {
        const auto o = opts(ScheduleKind::Interleaved, pp, v, mb);
        const auto order = body_compute_order(o);
        const int g = o.effective_group_size();
        for (int r = 0; r < pp; ++r) {
          const int warmup = std::min((v - 1) * g + 2 * (pp - 1 - r), v * mb);
          EXPECT_EQ(interleaved_warmup(o, r), warmup);
          EXPECT_EQ(leading_forwards(order[r]), std::min(warmup + 1, v * mb))
              << "pp " << pp << " v " << v << " mb " << mb << " rank " << r;
        }
      }
}

TEST(GenerateBody, InterleavedAcceptsFewOrUnevenMicroBatches) {
  const std::vector<std::tuple<int, int, int>> cases = {{4, 2, 1}, {4, 2, 3},  {8, 3, 5}, {4, 3, 5},
                                                        {4, 2, 10}, {6, 4, 8}, {4, 4, 17}};
  for (auto [pp, v, mb] : cases) {
    const auto s = generate(opts(ScheduleKind::Interleaved, pp, v, mb));
    const auto res = validate(s);
    EXPECT_TRUE(res.ok()) << "pp " << pp << " v " << v << " mb " << mb << "\n" << res.to_string();
  }
}

TEST(GenerateComms, NoneWithinOneRank) {
  const auto s = generate(opts(ScheduleKind::Interleaved, 1, 3, 4));
  EXPECT_EQ(s.ranks[0], body_compute_order(s.options)[0]);
  EXPECT_TRUE(validate(s).ok());
}

// With PP = 2 and v = 2 rank 1 gets chunk 1's gradient of micro 0 before its
// forward of micro 2, but consumes it only after: the receive moves up so the
// rendezvous cannot deadlock, and stays in FIFO order with the activations.
TEST(GenerateComms, EarlyReceiveWhereNaturalPlacementDeadlocks) {
  const auto s = generate(opts(ScheduleKind::Interleaved, 2, 2, 4));
  const auto& r1 = s.ranks[1];
  const int recv = position(r1, {ActionType::RECV_B, 1, 0, 0});
  ASSERT_GE(recv, 0);
  EXPECT_LT(recv, position(r1, {ActionType::FWD, 1, 2, -1}));
  EXPECT_LT(position(r1, {ActionType::FWD, 1, 2, -1}), position(r1, {ActionType::BWD, 1, 0, -1}));
  const auto res = validate(s);
  EXPECT_TRUE(res.ok()) << res.to_string();
}

TEST(GenerateComms, FifoRepairAfterADeadlockRepair) {
  // PP 2, v 2, MB 5 needs both repairs, in turn: without the FIFO repair
  // the deadlock repair ends with 1RECV_F3@0 a batch earlier. This pins
  // rank 1's list as the library has always generated it (the checks of
  // generated schedules accept either).
  const Schedule s = generate(opts(ScheduleKind::Interleaved, 2, 2, 5));
  EXPECT_EQ(text(s.ranks[1]),
            "1RECV_F0@0 1F0 1SEND_F0@0 1RECV_F1@0 1F1 1SEND_F1@0 1RECV_F2@0 1F2 1SEND_F2@0 3RECV_F0@0 3F0 3B0 "
            "3SEND_B0@0 3RECV_F1@0 3F1 3B1 3SEND_B1@0 3RECV_F2@0 1RECV_B0@0 3F2 3B2 3SEND_B2@0 1RECV_F3@0 "
            "1RECV_B1@0 1RECV_F4@0 1F3 1SEND_F3@0 1B0 1SEND_B0@0 1RECV_B2@0 3RECV_F3@0 1F4 1SEND_F4@0 1B1 "
            "1SEND_B1@0 3F3 1B2 1SEND_B2@0 3RECV_F4@0 3F4 3B3 3SEND_B3@0 3B4 3SEND_B4@0 1RECV_B3@0 1B3 "
            "1SEND_B3@0 1RECV_B4@0 1B4 1SEND_B4@0");
  EXPECT_TRUE(validate(s).ok()) << validate(s).to_string();
}

TEST(GenerateComms, RejectsBadComputeLists) {
  const auto o = opts(ScheduleKind::OneFOneB, 2, 1, 1);
  auto wrong_rank = body_compute_order(o);
  std::swap(wrong_rank[0], wrong_rank[1]);
  EXPECT_THROW(insert_body_comms(o, wrong_rank), std::invalid_argument);
  EXPECT_THROW(insert_body_comms(o, {{}}), std::invalid_argument);
  // Rank 1 runs its backward before the forward it needs: can never run.
  std::vector<std::vector<Action>> cyclic = {{{ActionType::FWD, 0, 0}, {ActionType::BWD, 0, 0}},
                                             {{ActionType::BWD, 1, 0}, {ActionType::FWD, 1, 0}}};
  try {
    insert_body_comms(o, cyclic);
    ADD_FAILURE() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 waits forever at 1B0"), std::string::npos) << e.what();
  }
}

TEST(GenerateFilter, DropsActions) {
  const auto s = generate(opts(ScheduleKind::OneFOneB, 2, 1, 2));
  const auto f = filter(s, keep_compute);
  EXPECT_EQ(f.ranks, body_compute_order(s.options));
  EXPECT_EQ(f.options.kind, ScheduleKind::OneFOneB);
}

// Every kind over PP 1..8, v 1..4, MB 1..32 with the default group size: the
// schedule validates and its compute is exactly the body order.
TEST(GenerateGrid, EveryKindValidates) {
  const auto start = std::chrono::steady_clock::now();
  int checked = 0;
  for (ScheduleKind kind : {ScheduleKind::NoPipelining, ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved})
    for (int pp = 1; pp <= 8; ++pp)
      for (int v = 1; v <= 4; ++v)
        for (int mb = 1; mb <= 32; ++mb) {
          const auto o = opts(kind, pp, v, mb);
          if (!rejection(o).empty()) continue;
          const Schedule s = generate(o);
          const auto res = validate(s);
          ASSERT_TRUE(res.ok()) << kind_name(kind) << " pp " << pp << " v " << v << " mb " << mb << "\n"
                                << res.to_string();
          ASSERT_EQ(filter(s, keep_compute).ranks, body_compute_order(o));
          ++checked;
        }
  EXPECT_EQ(checked, 32 + 8 * 32 * 2 + 8 * 4 * 32);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("seconds", std::to_string(seconds));
}

// Forward-only (evaluation, generation): every layout, MPipe included,
// validates; each rank runs its training forwards in the training order and
// nothing of the backward.
TEST(GenerateForwardOnly, EveryKindValidatesWithTheTrainingForwardOrder) {
  int checked = 0;
  for (ScheduleKind kind : {ScheduleKind::NoPipelining, ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved, ScheduleKind::MPipe})
    for (int pp = 1; pp <= 6; ++pp)
      for (int v = 1; v <= 3; ++v)
        for (int mb = 1; mb <= 13; ++mb)
          for (bool owner_backward : {false, true}) {
            auto o = opts(kind, pp, v, mb);
            o.mpipe.owner_backward = owner_backward;
            if (!rejection(o).empty() || (owner_backward && kind != ScheduleKind::MPipe)) continue;
            const Schedule train = generate(o);
            o.forward_only = true;
            const Schedule s = generate(o);
            const auto res = validate(s);
            ASSERT_TRUE(res.ok()) << kind_name(kind) << " pp " << pp << " v " << v << " mb " << mb << "\n"
                                  << res.to_string();
            const auto forwards = [](const Schedule& x) {
              return filter(x, [](ActionType t) { return t == ActionType::FWD; }).ranks;
            };
            ASSERT_EQ(forwards(s), forwards(train));
            for (const auto& rank : s.ranks)
              for (const Action& a : rank)
                ASSERT_TRUE(a.type == ActionType::FWD || a.type == ActionType::SEND_F || a.type == ActionType::RECV_F ||
                            a.type == ActionType::MPIPE_PARAM_BROADCAST || a.type == ActionType::MPIPE_TRANSPOSE_FWD ||
                            a.type == ActionType::MPIPE_FWD_SEND || a.type == ActionType::MPIPE_FWD_RECV)
                    << format_action(a) << " in a forward-only " << kind_name(kind) << " schedule";
            ++checked;
          }
  EXPECT_GT(checked, 500);
}

TEST(GenerateForwardOnly, ABackwardIsRejectedByValidation) {
  auto o = opts(ScheduleKind::OneFOneB, 2, 1, 2);
  o.forward_only = true;
  Schedule s = generate(o);
  s.ranks[1].push_back(Action{ActionType::BWD, 1, 0, -1});
  const auto res = validate(s);
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.to_string().find("a backward in a forward-only schedule"), std::string::npos) << res.to_string();
  // And a training schedule without its backwards is incomplete.
  o.forward_only = false;
  s = generate(o);
  s.ranks[1].erase(std::remove_if(s.ranks[1].begin(), s.ranks[1].end(),
                                  [](const Action& a) { return a.type == ActionType::BWD; }),
                   s.ranks[1].end());
  EXPECT_NE(validate(s).to_string().find("has no backward"), std::string::npos);
}

}  // namespace
}  // namespace hp::schedule
