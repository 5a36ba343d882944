#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "hand_schedules.hpp"
#include "schedule/generate.hpp"
#include "schedule/owner_search.hpp"
#include "schedule/schedule_io.hpp"
#include "schedule/simulate.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

using testing::position;
using testing::text;

ScheduleOptions mpipe_opts(int pp, int vpp, int mb) { return testing::layout(ScheduleKind::MPipe, pp, vpp, mb); }

// The schedule MPipe transposes around, generated on its own.
std::vector<std::vector<Action>> plain_body(ScheduleOptions o) {
  o.kind = o.mpipe.body;
  return generate(o).ranks;
}

bool not_mpipe(ActionType t) { return !is_mpipe(t); }

int count(const std::vector<Action>& actions, ActionType t) {
  return static_cast<int>(std::count_if(actions.begin(), actions.end(), [t](const Action& a) { return a.type == t; }));
}

int count(const Schedule& s, ActionType t) {
  int n = 0;
  for (const auto& rank : s.ranks) n += count(rank, t);
  return n;
}

Action mp(ActionType t, int micro = -1, int peer = -1) { return Action{t, 0, micro, peer}; }

using testing::rejection;

void expect_valid(const Schedule& s) {
  const auto res = validate(s);
  EXPECT_TRUE(res.ok()) << res.to_string();
}

// Spec section 4, first worked example: PP=4, one chunk, MB=4, NT=4.
TEST(MPipeExamples, FourRanksFourMicros) {
  const Schedule s = generate_mpipe(mpipe_opts(4, 1, 4));
  const auto body = plain_body(s.options);
  EXPECT_EQ(text(s.ranks[0], 0, 8),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_FWD_RECV1@1 0MPIPE_FWD_RECV2@2 "
            "0MPIPE_FWD_RECV3@3 0MPIPE_GRAPH_RECV1@1 0MPIPE_GRAPH_RECV2@2 0MPIPE_GRAPH_RECV3@3");
  for (int r = 1; r < 4; ++r) {
    const std::string m = std::to_string(r);
    EXPECT_EQ(text(s.ranks[r], 0, 4), "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD" + m + " 0MPIPE_FWD_SEND" + m +
                                          "@0 0MPIPE_GRAPH_SEND" + m + "@0");
    EXPECT_EQ(std::vector<Action>(s.ranks[r].begin() + 4, s.ranks[r].end()), body[r]) << "rank " << r;
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(count(s.ranks[r], ActionType::MPIPE_TRANSPOSE_FWD), 1) << r;
  EXPECT_EQ(count(s.ranks[0], ActionType::MPIPE_FWD_RECV), 3);
  EXPECT_EQ(count(s.ranks[0], ActionType::MPIPE_GRAPH_RECV), 3);
  EXPECT_EQ(count(s, ActionType::MPIPE_TRANSPOSE_BWD), 4);
  for (int m = 0; m < 4; ++m) {
    const int b = position(s.ranks[0], {ActionType::BWD, 0, m, -1});
    ASSERT_GE(b, 0);
    EXPECT_EQ(s.ranks[0][b + 1], mp(ActionType::MPIPE_TRANSPOSE_BWD, m)) << m;
  }
  EXPECT_EQ(count(s, ActionType::MPIPE_GRAD_REDUCE), 0);
  expect_valid(s);
}

// Second example: PP=4, two chunks, MB=8 under "min": rank 0 runs micros
// 4..7 inline, each right before its FWD(0, m).
TEST(MPipeExamples, MinOverflowRunsInline) {
  auto o = mpipe_opts(4, 2, 8);
  o.mpipe.overflow = Overflow::Min;
  const Schedule s = generate_mpipe(o);
  const auto& r0 = s.ranks[0];
  EXPECT_EQ(text(r0, 0, 8),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_FWD_RECV1@1 0MPIPE_FWD_RECV2@2 "
            "0MPIPE_FWD_RECV3@3 0MPIPE_GRAPH_RECV1@1 0MPIPE_GRAPH_RECV2@2 0MPIPE_GRAPH_RECV3@3");
  for (int m = 4; m < 8; ++m) {
    const int f = position(r0, {ActionType::FWD, 0, m, -1});
    ASSERT_GE(f, 1);
    EXPECT_EQ(r0[f - 1], mp(ActionType::MPIPE_TRANSPOSE_FWD, m)) << m;
  }
  EXPECT_EQ(count(r0, ActionType::MPIPE_TRANSPOSE_FWD), 5);
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(count(s.ranks[r], ActionType::MPIPE_TRANSPOSE_FWD), 1);
    EXPECT_EQ(position(s.ranks[r], mp(ActionType::MPIPE_TRANSPOSE_FWD, r)), 1);
  }
  // A trainable preprocess: every micro's backward runs on rank 0.
  for (int m = 0; m < 8; ++m) {
    const int b = position(r0, {ActionType::BWD, 0, m, -1});
    EXPECT_EQ(r0[b + 1], mp(ActionType::MPIPE_TRANSPOSE_BWD, m)) << m;
  }
  EXPECT_EQ(filter(s, not_mpipe).ranks, plain_body(o));
  expect_valid(s);
}

// Third example: PP=4, MB=2 (NT=2): ranks 2 and 3 only join the broadcast.
TEST(MPipeExamples, IdleRanksOnlyBroadcast) {
  const Schedule s = generate_mpipe(mpipe_opts(4, 1, 2));
  const auto body = plain_body(s.options);
  for (int r : {2, 3}) {
    ASSERT_FALSE(s.ranks[r].empty());
    EXPECT_EQ(s.ranks[r][0], mp(ActionType::MPIPE_PARAM_BROADCAST));
    EXPECT_EQ(std::vector<Action>(s.ranks[r].begin() + 1, s.ranks[r].end()), body[r]);
  }
  EXPECT_EQ(text(s.ranks[0], 0, 4),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_FWD_RECV1@1 0MPIPE_GRAPH_RECV1@1");
  EXPECT_EQ(text(s.ranks[1], 0, 4),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 0MPIPE_GRAPH_SEND1@0");
  expect_valid(s);
}

// "full": micro m is owned by rank m % NT; each owner runs all its forwards
// and sends in its prefix, the input shipments after every output shipment.
TEST(MPipeLayout, FullSpreadsTheOverflow) {
  const Schedule s = generate_mpipe(mpipe_opts(4, 2, 10));
  EXPECT_EQ(text(s.ranks[1], 0, 10),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 0MPIPE_TRANSPOSE_FWD5 "
            "0MPIPE_FWD_SEND5@0 0MPIPE_TRANSPOSE_FWD9 0MPIPE_FWD_SEND9@0 0MPIPE_GRAPH_SEND1@0 "
            "0MPIPE_GRAPH_SEND5@0 0MPIPE_GRAPH_SEND9@0");
  EXPECT_EQ(text(s.ranks[0], 0, 18),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_TRANSPOSE_FWD4 0MPIPE_TRANSPOSE_FWD8 "
            "0MPIPE_FWD_RECV1@1 0MPIPE_FWD_RECV2@2 0MPIPE_FWD_RECV3@3 0MPIPE_FWD_RECV5@1 0MPIPE_FWD_RECV6@2 "
            "0MPIPE_FWD_RECV7@3 0MPIPE_FWD_RECV9@1 0MPIPE_GRAPH_RECV1@1 0MPIPE_GRAPH_RECV2@2 "
            "0MPIPE_GRAPH_RECV3@3 0MPIPE_GRAPH_RECV5@1 0MPIPE_GRAPH_RECV6@2 0MPIPE_GRAPH_RECV7@3 "
            "0MPIPE_GRAPH_RECV9@1");
  EXPECT_EQ(count(s.ranks[3], ActionType::MPIPE_TRANSPOSE_FWD), 2);
  expect_valid(s);
}

// T = 0 transposes only the data load: no broadcast, input shipment or
// preprocess backward.
TEST(MPipeLayout, DataLoadOnly) {
  auto o = mpipe_opts(4, 1, 6);
  o.mpipe.transpose_layers = 0;
  const Schedule s = generate_mpipe(o);
  EXPECT_EQ(count(s, ActionType::MPIPE_TRANSPOSE_FWD), 6);
  EXPECT_EQ(count(s, ActionType::MPIPE_FWD_SEND), 4);
  EXPECT_EQ(count(s, ActionType::MPIPE_FWD_RECV), 4);
  for (ActionType t : {ActionType::MPIPE_PARAM_BROADCAST, ActionType::MPIPE_GRAPH_SEND,
                       ActionType::MPIPE_GRAPH_RECV, ActionType::MPIPE_TRANSPOSE_BWD, ActionType::MPIPE_GRAD_REDUCE})
    EXPECT_EQ(count(s, t), 0) << type_name(t);
  EXPECT_EQ(text(s.ranks[2], 0, 4), "0MPIPE_TRANSPOSE_FWD2 0MPIPE_FWD_SEND2@0 2RECV_F0@1 2F0");
  expect_valid(s);
}

// A frozen preprocess keeps the broadcast (the runtime sends it once; it is
// the step's sync point) and ships only features.
TEST(MPipeLayout, FrozenPreprocess) {
  auto o = mpipe_opts(4, 2, 8);
  o.mpipe.frozen_preprocess = true;
  const Schedule s = generate_mpipe(o);
  EXPECT_EQ(count(s, ActionType::MPIPE_PARAM_BROADCAST), 4);
  EXPECT_EQ(count(s, ActionType::MPIPE_FWD_SEND), 6);
  for (ActionType t : {ActionType::MPIPE_GRAPH_SEND, ActionType::MPIPE_GRAPH_RECV, ActionType::MPIPE_TRANSPOSE_BWD,
                       ActionType::MPIPE_GRAD_SEND, ActionType::MPIPE_GRAD_REDUCE})
    EXPECT_EQ(count(s, t), 0) << type_name(t);
  expect_valid(s);
}

TEST(MPipeLayout, OwnerBackwardSuffix) {
  auto o = mpipe_opts(2, 1, 3);
  o.mpipe.owner_backward = true;
  const Schedule s = generate_mpipe(o);
  // NT = 2: rank 0 owns micros 0 and 2, rank 1 owns micro 1.
  EXPECT_EQ(text(s.ranks[0]),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_TRANSPOSE_FWD2 0MPIPE_FWD_RECV1@1 0F0 "
            "0SEND_F0@1 0F1 0SEND_F1@1 0F2 0SEND_F2@1 0RECV_B0@1 0B0 0MPIPE_TRANSPOSE_BWD0 0RECV_B1@1 0B1 "
            "0RECV_B2@1 0B2 0MPIPE_TRANSPOSE_BWD2 0MPIPE_GRAD_SEND1@1 0MPIPE_GRAD_REDUCE");
  EXPECT_EQ(text(s.ranks[1]),
            "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 1RECV_F0@0 1F0 1B0 1SEND_B0@0 "
            "1RECV_F1@0 1F1 1B1 1SEND_B1@0 1RECV_F2@0 1F2 1B2 1SEND_B2@0 0MPIPE_GRAD_RECV_WITH_BACKWARD1@0 "
            "0MPIPE_GRAD_REDUCE");
  expect_valid(s);
}

TEST(MPipeLayout, OwnerBackwardWithSeveralOwnedMicros) {
  auto o = mpipe_opts(3, 2, 7);
  o.mpipe.owner_backward = true;
  const Schedule s = generate_mpipe(o);
  EXPECT_EQ(text(s.ranks[0], s.ranks[0].size() - 5),
            "0MPIPE_GRAD_SEND1@1 0MPIPE_GRAD_SEND2@2 0MPIPE_GRAD_SEND4@1 0MPIPE_GRAD_SEND5@2 0MPIPE_GRAD_REDUCE");
  EXPECT_EQ(text(s.ranks[2], s.ranks[2].size() - 3),
            "0MPIPE_GRAD_RECV_WITH_BACKWARD2@0 0MPIPE_GRAD_RECV_WITH_BACKWARD5@0 0MPIPE_GRAD_REDUCE");
  EXPECT_EQ(count(s.ranks[0], ActionType::MPIPE_TRANSPOSE_BWD), 3);  // micros 0, 3, 6
  EXPECT_EQ(count(s, ActionType::MPIPE_GRAPH_SEND), 0);
  expect_valid(s);
}

TEST(MPipeLayout, GenerateDispatchesAndMarksTheKind) {
  auto o = mpipe_opts(4, 2, 8);
  o.kind = ScheduleKind::Interleaved;
  const Schedule direct = generate_mpipe(o);
  EXPECT_EQ(direct.options.kind, ScheduleKind::MPipe);
  for (const auto& rank : direct.ranks)
    for (const Action& a : rank) {
      if (is_mpipe(a.type)) {
        EXPECT_EQ(a.stage, 0) << format_action(a);
      }
    }
  o.kind = ScheduleKind::MPipe;
  EXPECT_EQ(generate(o).ranks, direct.ranks);
}

TEST(MPipeOptions, RejectsBadInputNamingTheFlag) {
  EXPECT_EQ(rejection(mpipe_opts(1, 1, 4)).rfind(
                "MPipe Transpose needs schedule.pp >= 2: with one rank there is no idle warmup to transpose into", 0),
            0u);
  auto o = mpipe_opts(4, 2, 8);
  o.mpipe.transpose_layers = -1;
  EXPECT_NE(rejection(o).find("schedule.mpipe.transpose_layers must be >= 0"), std::string::npos);

  // 8 layers over 8 chunks: stage 0 holds 1, so only T = 0 fits.
  o.layers = 8;
  o.mpipe.transpose_layers = 1;
  EXPECT_NE(rejection(o).find("schedule.mpipe.transpose_layers must be < 1, the layers of stage 0's first chunk"), std::string::npos)
      << rejection(o);
  o.mpipe.transpose_layers = 0;
  EXPECT_EQ(rejection(o), "");
  // 10 layers: stages 0 and 1 take the remainder, so stage 0 holds 2.
  o.layers = 10;
  o.mpipe.transpose_layers = 1;
  EXPECT_EQ(rejection(o), "");
  o.mpipe.transpose_layers = 2;
  EXPECT_NE(rejection(o).find("schedule.mpipe.transpose_layers must be < 2"), std::string::npos);

  o = mpipe_opts(4, 2, 8);
  o.mpipe.owner_backward = true;
  o.mpipe.transpose_layers = 0;
  EXPECT_EQ(rejection(o), "schedule.mpipe.owner_backward needs schedule.mpipe.transpose_layers >= 1: with T = 0 there is nothing to backprop");
  o.mpipe.transpose_layers = 1;
  o.mpipe.frozen_preprocess = true;
  EXPECT_NE(rejection(o).find("schedule.mpipe.owner_backward needs a trainable preprocess: with schedule.mpipe.frozen_preprocess"),
            std::string::npos);
  EXPECT_THROW(generate_mpipe(o), std::invalid_argument);
}

// Every valid option combination over PP 2..8, v 1..4, MB 1..32, and at v 1
// every body: the schedule validates, stripping MPIPE_* leaves the plain body
// exactly, and each MPipe step appears as often as the layout says.
// MPipe around a body: valid, stripped back to the body exactly, and the
// MPIPE_* steps the options call for, each as often as it should appear.
void expect_invariant_and_valid(const ScheduleOptions& o, const std::vector<std::vector<Action>>& body) {
  const MPipeOptions& m = o.mpipe;
  const int pp = o.pp, mb = o.micro_batches, t = m.transpose_layers;
  const std::string where = std::string(kind_name(m.body)) + " body, pp " + std::to_string(pp) + " v " +
                            std::to_string(o.vpp) + " mb " + std::to_string(mb) + " T " + std::to_string(t) +
                            (m.overflow == Overflow::Min ? " min" : " full") + (m.owner_backward ? " owner-backward" : "") +
                            (m.frozen_preprocess ? " frozen" : "");
  const Schedule s = generate_mpipe(o);
  const auto res = validate(s);
  ASSERT_TRUE(res.ok()) << where << "\n" << res.to_string();
  ASSERT_EQ(filter(s, not_mpipe).ranks, body) << where;
  int elsewhere = 0, at_rank0 = 0;
  for (int i = 0; i < mb; ++i) (mpipe_owner(o, i) == 0 ? at_rank0 : elsewhere)++;
  const bool trainable = t > 0 && !m.frozen_preprocess;
  const bool ship_graph = trainable && !m.owner_backward;
  ASSERT_EQ(count(s, ActionType::MPIPE_TRANSPOSE_FWD), mb) << where;
  ASSERT_EQ(count(s, ActionType::MPIPE_FWD_SEND), elsewhere) << where;
  ASSERT_EQ(count(s, ActionType::MPIPE_PARAM_BROADCAST), t > 0 ? pp : 0) << where;
  ASSERT_EQ(count(s, ActionType::MPIPE_GRAPH_RECV), ship_graph ? elsewhere : 0) << where;
  ASSERT_EQ(count(s, ActionType::MPIPE_TRANSPOSE_BWD), !trainable ? 0 : m.owner_backward ? at_rank0 : mb) << where;
  ASSERT_EQ(count(s, ActionType::MPIPE_GRAD_SEND), m.owner_backward ? elsewhere : 0) << where;
  ASSERT_EQ(count(s, ActionType::MPIPE_GRAD_REDUCE), m.owner_backward ? pp : 0) << where;
}

// Every accepted combination of T, overflow, owner-backward and frozen over
// a body layout; returns how many it checked.
int check_every_option(const ScheduleOptions& layout) {
  const auto body = plain_body(layout);
  int checked = 0;
  for (int t = 0; t <= 2; ++t)
    for (Overflow overflow : {Overflow::Full, Overflow::Min})
      for (bool owner_backward : {false, true})
        for (bool frozen : {false, true}) {
          auto o = layout;
          o.mpipe = {t, overflow, owner_backward, frozen, {}, layout.mpipe.body};
          if (!rejection(o).empty()) continue;
          expect_invariant_and_valid(o, body);
          if (::testing::Test::HasFatalFailure()) return checked;
          ++checked;
        }
  return checked;
}

TEST(MPipeGrid, InvariantAndValidity) {
  int checked = 0;
  for (int pp = 2; pp <= 8; ++pp)
    for (int v = 1; v <= 4; ++v)
      for (int mb = 1; mb <= 32; ++mb)
        for (ScheduleKind body_kind : {ScheduleKind::Interleaved, ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
          if (v > 1 && body_kind != ScheduleKind::Interleaved) continue;
          auto layout = mpipe_opts(pp, v, mb);
          layout.mpipe.body = body_kind;
          checked += check_every_option(layout);
          if (HasFatalFailure()) return;
        }
  // Per layout: T=0 with full/min x frozen or not (4), T=1 and T=2 with
  // full/min x (trainable, frozen, owner-backward) (6 each); v 1 has three bodies.
  EXPECT_EQ(checked, 7 * (3 + 3) * 32 * 16);
}

// Around the zero-bubble bodies: zb1p at v 1 to 3 and any MB, zbv at any MB,
// dualpipev from MB = 2 PP; each read back from CSV names its body.
TEST(MPipeGrid, AroundTheZeroBubbleBodies) {
  int checked = 0, layouts = 0;
  for (int pp = 2; pp <= 5; ++pp)
    for (int mb = 1; mb <= 3 * pp + 1; ++mb)
      for (auto [body_kind, v] : {std::pair{ScheduleKind::ZeroBubble1P, 1}, {ScheduleKind::ZeroBubble1P, 2},
                                  {ScheduleKind::ZeroBubble1P, 3}, {ScheduleKind::ZeroBubbleV, 2},
                                  {ScheduleKind::DualPipeV, 2}}) {
        if (body_kind == ScheduleKind::DualPipeV && mb < 2 * pp) continue;
        auto layout = mpipe_opts(pp, v, mb);
        layout.mpipe.body = body_kind;
        checked += check_every_option(layout);
        if (HasFatalFailure()) return;
        ++layouts;
        layout.mpipe.transpose_layers = 1;
        EXPECT_EQ(from_csv(to_csv(generate_mpipe(layout))).options.mpipe.body, body_kind)
            << kind_name(body_kind) << " pp " << pp << " mb " << mb;
      }
  EXPECT_EQ(checked, 16 * layouts);
}

// --overflow auto over the zero-bubble bodies: the owners it picks give a
// valid schedule that strips back to its body, never slower than full or min.
TEST(MPipeGrid, AutoOverflowAroundTheZeroBubbleBodies) {
  CostModel c;
  c.f = 1, c.b = 2, c.pre_f = 0.5, c.pre_b = 1;
  for (auto [body_kind, v, mb] : {std::tuple{ScheduleKind::ZeroBubble1P, 1, 6}, {ScheduleKind::ZeroBubble1P, 2, 7},
                                  {ScheduleKind::ZeroBubbleV, 2, 5}, {ScheduleKind::DualPipeV, 2, 9}}) {
    auto o = mpipe_opts(4, v, mb);
    o.mpipe.body = body_kind;
    o.mpipe.transpose_layers = 1;
    const OwnerChoice choice = choose_owners(o, c);
    o.mpipe.overflow = Overflow::Auto;
    o.mpipe.owners = choice.owners;
    expect_invariant_and_valid(o, plain_body(o));
    EXPECT_LE(choice.step_time, std::min(choice.full_step, choice.min_step)) << kind_name(body_kind);
    EXPECT_DOUBLE_EQ(simulate(generate_mpipe(o), c).step_time, choice.step_time) << kind_name(body_kind);
  }
}

// Issue 13 part 6: the spec's interleaved body at v 1 warms rank 0 up
// 2(PP-1) deep; over 1F1B MPipe keeps 1F1B's PP in flight, over GPipe all MB.
TEST(MPipeBodies, RankZeroHoldsWhatItsBodyHolds) {
  for (auto [body, held] : {std::pair{ScheduleKind::Interleaved, 7}, {ScheduleKind::OneFOneB, 4},
                            {ScheduleKind::GPipe, 8}}) {
    auto o = mpipe_opts(4, 1, 8);
    o.mpipe.body = body;
    const Schedule s = generate(o);
    expect_valid(s);
    EXPECT_EQ(filter(s, not_mpipe).ranks, plain_body(o)) << kind_name(body);
    EXPECT_EQ(simulate(s, CostModel{}).ranks[0].peak_activations, held) << kind_name(body);
    // The body is read back from the actions.
    const Schedule back = from_csv(to_csv(s));
    EXPECT_EQ(back.options.mpipe.body, body) << kind_name(body);
    EXPECT_EQ(generate(back.options).ranks, s.ranks) << kind_name(body);
  }
}

TEST(MPipeBodies, OneChunkBodiesRefuseChunksAndOnlyPipelinesAreBodies) {
  auto o = mpipe_opts(4, 2, 8);
  o.mpipe.body = ScheduleKind::OneFOneB;
  EXPECT_EQ(rejection(o),
            "schedule.mpipe.body 1f1b runs one chunk per rank: use schedule.vpp 1, or schedule.mpipe.body "
            "interleaved for schedule.vpp > 1 (got schedule.vpp 2)");
  o.vpp = 1;
  EXPECT_EQ(rejection(o), "");
  o.mpipe.body = ScheduleKind::NoPipelining;
  EXPECT_EQ(rejection(o),
            "schedule.mpipe.body must be one of gpipe, 1f1b, interleaved, zb1p, zbv, dualpipev (the pipeline MPipe "
            "transposes around), got no-pipelining");
  // A zero-bubble body's own rules, named as the body's.
  o.mpipe.body = ScheduleKind::DualPipeV;
  o.vpp = 2;
  o.micro_batches = 7;
  EXPECT_EQ(rejection(o),
            "schedule.mpipe.body dualpipev needs schedule.micro_batches >= 2 x schedule.pp = 8 (one per stage; got "
            "schedule.micro_batches 7); use more micro-batches, or schedule.mpipe.body zbv, which takes any");
  o.mpipe.body = ScheduleKind::MPipe;
  EXPECT_NE(rejection(o).find("got mpipe"), std::string::npos);
}

}  // namespace
}  // namespace hp::schedule
