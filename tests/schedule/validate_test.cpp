#include "schedule/validate.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include <sstream>
#include <string>
#include <vector>

#include "hand_schedules.hpp"
#include "schedule/comm_check.hpp"
#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

using testing::from_text;

Schedule one_f_one_b(int pp, int mb) { return testing::hand_1f1b(pp, mb); }

bool has_issue(const ValidationResult& r, const std::string& needle, int rank = -2, int pos = -2) {
  for (const auto& i : r.issues)
    if (i.message.find(needle) != std::string::npos && (rank == -2 || i.rank == rank) &&
        (pos == -2 || i.position == pos))
      return true;
  return false;
}

// PP=2, MB=2 MPipe: rank 1 transposes micro 1 and ships output and input; rank 0
// transposes micro 0 itself and runs both preprocess backwards.
std::vector<std::string> mpipe_lines() {
  return {
      "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_FWD_RECV1@1 0MPIPE_GRAPH_RECV1@1 "
      "0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0MPIPE_TRANSPOSE_BWD0 0RECV_B1@1 0B1 0MPIPE_TRANSPOSE_BWD1",
      "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 0MPIPE_GRAPH_SEND1@0 "
      "1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0",
  };
}

TEST(ValidateTest, AcceptsHandWrittenOneFOneB) {
  for (int pp : {1, 2, 3, 4, 8})
    for (int mb : {1, 2, 3, 4, 8, 13}) {
      const ValidationResult r = validate(one_f_one_b(pp, mb));
      EXPECT_TRUE(r.ok()) << "pp " << pp << " mb " << mb << "\n" << r.to_string();
    }
}

TEST(ValidateTest, AcceptsLocalEdgesWithinOneRank) {
  // PP=1 with two chunks: stage 1 follows stage 0 on the same rank, no comms.
  const ValidationResult r = validate(from_text(1, 2, {"0F0 1F0 0F1 1F1 1B0 0B0 1B1 0B1"}, 2));
  EXPECT_TRUE(r.ok()) << r.to_string();
}

TEST(ValidateTest, AcceptsHandWrittenMPipe) {
  const ValidationResult r = validate(from_text(2, 2, mpipe_lines()));
  EXPECT_TRUE(r.ok()) << r.to_string();
}

TEST(ValidateTest, RejectsMissingReceive) {
  Schedule s = one_f_one_b(2, 2);
  s.ranks[1].erase(s.ranks[1].begin());  // 1RECV_F0@0
  const ValidationResult r = validate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_issue(r, "1F0: needs 1RECV_F0@0 earlier on rank 1, but the schedule has none", 1, 0)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "0SEND_F0@1: FIFO mismatch", 0, 1)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "deadlock: rank 0 at 3 (0SEND_F1@1) waits for rank 1, which never posts the matching receive"))
      << r.to_string();
}

TEST(ValidateTest, RejectsMissingForward) {
  Schedule s = one_f_one_b(2, 2);
  auto& r1 = s.ranks[1];
  r1.erase(std::find(r1.begin(), r1.end(), Action{ActionType::FWD, 1, 1}));
  const ValidationResult r = validate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_issue(r, "stage 1 micro 1 has no forward", 1, -1)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "1B1: needs 1F1 earlier on rank 1, but the schedule has none")) << r.to_string();
}

TEST(ValidateTest, RejectsUnmatchedSendAndReceiveNamingEachChannel) {
  // Rank 0 sends micro 1's output a second time at the end; rank 1 never
  // sends micro 1's gradient back. Each channel is reported once, in
  // (sender, receiver) order.
  Schedule s = one_f_one_b(3, 2);
  s.ranks[0].push_back(Action{ActionType::SEND_F, 0, 1, 1});
  auto& r1 = s.ranks[1];
  r1.erase(std::find(r1.begin(), r1.end(), Action{ActionType::SEND_B, 1, 1, 0}));
  const ValidationResult r = validate(s);
  ASSERT_FALSE(r.ok());
  const int extra_send = static_cast<int>(s.ranks[0].size()) - 1;
  const int lone_recv = static_cast<int>(
      std::find(s.ranks[0].begin(), s.ranks[0].end(), Action{ActionType::RECV_B, 0, 1, 1}) - s.ranks[0].begin());
  EXPECT_TRUE(has_issue(r,
                        "0SEND_F1@1: send #2 from rank 0 to rank 1 has no matching receive; rank 1 posts only 2 "
                        "receives from rank 0",
                        0, extra_send))
      << r.to_string();
  EXPECT_TRUE(has_issue(r,
                        "0RECV_B1@1: receive #1 on rank 0 from rank 1 has no matching send; rank 1 posts only 1 "
                        "sends to rank 0",
                        0, lone_recv))
      << r.to_string();
  const std::string text = r.to_string();
  EXPECT_LT(text.find("send #2 from rank 0"), text.find("receive #1 on rank 0")) << text;
}

TEST(ValidateTest, RejectsDuplicateForward) {
  Schedule s = one_f_one_b(2, 2);
  s.ranks[1].insert(s.ranks[1].begin() + 2, Action{ActionType::FWD, 1, 0});
  const ValidationResult r = validate(s);
  EXPECT_TRUE(has_issue(r, "1F0: appears twice (first at rank 1 position 1)", 1, 2)) << r.to_string();
}

TEST(ValidateTest, RejectsMissingBackward) {
  Schedule s = one_f_one_b(3, 2);
  auto& r2 = s.ranks[2];
  r2.erase(std::find(r2.begin(), r2.end(), Action{ActionType::BWD, 2, 1}));
  const ValidationResult r = validate(s);
  EXPECT_TRUE(has_issue(r, "stage 2 micro 1 has no backward", 2, -1)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "2SEND_B1@1: needs 2B1 earlier on rank 2")) << r.to_string();
}

TEST(ValidateTest, RejectsMutualWaitAsDeadlock) {
  // Each rank's receive sits in a batch of its own, separated by compute from
  // the send the other rank waits for. Every other check passes.
  const Schedule s = from_text(2, 2, {
                                         "0F0 0SEND_F0@1 0F1 0RECV_B0@1 0B0 0SEND_F1@1 0RECV_B1@1 0B1",
                                         "1RECV_F0@0 1F0 1RECV_F1@0 1F1 1B0 1SEND_B0@0 1B1 1SEND_B1@0",
                                     });
  const ValidationResult r = validate(s);
  ASSERT_EQ(r.issues.size(), 1u) << r.to_string();
  EXPECT_EQ(r.issues[0].message,
            "deadlock: rank 0 at 3 (0RECV_B0@1) waits for rank 1, which is at 2 (1RECV_F1@0); "
            "rank 1 at 2 (1RECV_F1@0) waits for rank 0, which is at 3 (0RECV_B0@1)");
  EXPECT_EQ(r.issues[0].rank, 0);
  EXPECT_EQ(r.issues[0].position, 3);
}

TEST(ValidateTest, RendezvousBlocksALoneSend) {
  // Rank 0 posts 0SEND_F0@1 alone and rank 1 posts its FWD_SEND1 alone; each
  // matching receive comes later on the other rank. Eager sends would pass,
  // rendezvous does not.
  const Schedule bad = from_text(
      2, 4,
      {
          "0MPIPE_TRANSPOSE_FWD0 0F0 0SEND_F0@1 0MPIPE_TRANSPOSE_FWD2 0MPIPE_FWD_RECV1@1 0MPIPE_FWD_RECV3@1 0F1 "
          "0SEND_F1@1 0RECV_B0@1 0B0 0F2 0SEND_F2@1 0RECV_B1@1 0B1 0F3 0SEND_F3@1 0RECV_B2@1 0B2 0RECV_B3@1 0B3",
          "0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 0MPIPE_TRANSPOSE_FWD3 0MPIPE_FWD_SEND3@0 "
          "1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0 "
          "1RECV_F2@0 1F2 1B2 1SEND_B2@0 1RECV_F3@0 1F3 1B3 1SEND_B3@0",
      });
  const ValidationResult r = validate(bad);
  ASSERT_EQ(r.issues.size(), 1u) << r.to_string();
  EXPECT_EQ(r.issues[0].message,
            "deadlock: rank 0 at 2 (0SEND_F0@1) waits for rank 1, which is at 1 (0MPIPE_FWD_SEND1@0); "
            "rank 1 at 1 (0MPIPE_FWD_SEND1@0) waits for rank 0, which is at 2 (0SEND_F0@1)");
  // Receiving every transposed output in rank 0's prefix, and posting the
  // sends with the first body receive as one batch, completes.
  const Schedule good = from_text(
      2, 4,
      {
          "0MPIPE_TRANSPOSE_FWD0 0MPIPE_TRANSPOSE_FWD2 0MPIPE_FWD_RECV1@1 0MPIPE_FWD_RECV3@1 0F0 0SEND_F0@1 0F1 "
          "0SEND_F1@1 0RECV_B0@1 0B0 0F2 0SEND_F2@1 0RECV_B1@1 0B1 0F3 0SEND_F3@1 0RECV_B2@1 0B2 0RECV_B3@1 0B3",
          "0MPIPE_TRANSPOSE_FWD1 0MPIPE_TRANSPOSE_FWD3 0MPIPE_FWD_SEND1@0 0MPIPE_FWD_SEND3@0 "
          "1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0 "
          "1RECV_F2@0 1F2 1B2 1SEND_B2@0 1RECV_F3@0 1F3 1B3 1SEND_B3@0",
      });
  EXPECT_TRUE(validate(good).ok()) << validate(good).to_string();
}

TEST(ValidateTest, RejectsFifoOrderMismatch) {
  const Schedule s = from_text(2, 2, {
                                         "0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0RECV_B1@1 0B1",
                                         "1RECV_F1@0 1RECV_F0@0 1F0 1F1 1B0 1SEND_B0@0 1B1 1SEND_B1@0",
                                     });
  const ValidationResult r = validate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(has_issue(r,
                        "0SEND_F0@1: FIFO mismatch: send #0 from rank 0 to rank 1 meets receive #0 at rank 1 "
                        "position 0 (1RECV_F1@0), expected 1RECV_F0@0",
                        0, 1))
      << r.to_string();
}

TEST(ValidateTest, RejectsWrongPeer) {
  Schedule s = one_f_one_b(3, 1);
  // Rank 1: 1RECV_F0@0 1F0 1SEND_F0@2 ...; point the send back at rank 0.
  ASSERT_EQ(s.ranks[1][2], (Action{ActionType::SEND_F, 1, 0, 2}));
  s.ranks[1][2].peer = 0;
  const ValidationResult r = validate(s);
  ASSERT_EQ(r.issues.size(), 1u) << r.to_string();
  EXPECT_EQ(r.issues[0].message, "1SEND_F0@0: wrong peer: the next stage (stage 2) is on rank 2");
  EXPECT_EQ(r.to_string(), "rank 1 position 2 (1SEND_F0@0): wrong peer: the next stage (stage 2) is on rank 2\n");
}

TEST(ValidateTest, RejectsStructuralErrors) {
  const ValidationResult r = validate(from_text(2, 2, {
                                                          "0F0 5F0 0F7 1F0 0SEND_B0@1 0RECV_F0@3",
                                                          "1SEND_F0@0 0MPIPE_TRANSPOSE_BWD0",
                                                      }));
  EXPECT_TRUE(has_issue(r, "stage out of range [0, 2)", 0, 1)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "micro-batch out of range [0, 2)", 0, 2)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "stage 1 runs on rank 1", 0, 3)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "stage 0 has no previous stage", 0, 4)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "peer out of range [0, 2)", 0, 5)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "stage 1 has no next stage", 1, 0)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "only rank 0 runs this", 1, 1)) << r.to_string();
}

TEST(ValidateTest, RejectsRankCountMismatch) {
  Schedule s = one_f_one_b(2, 2);
  s.ranks.pop_back();
  EXPECT_TRUE(has_issue(validate(s), "1 rank lists but options.pp is 2"));
}

TEST(ValidateTest, ChecksDependencyOrderWithinARank) {
  // Rank 0 sends micro 0's output before computing it.
  const ValidationResult r = validate(from_text(2, 1, {
                                                          "0SEND_F0@1 0F0 0RECV_B0@1 0B0",
                                                          "1RECV_F0@0 1F0 1B0 1SEND_B0@0",
                                                      }));
  EXPECT_TRUE(has_issue(r, "0SEND_F0@1: needs 0F0 earlier on rank 0, but it comes later, at position 1", 0, 0))
      << r.to_string();
  // Backward before its forward on the last stage.
  const ValidationResult r2 = validate(from_text(1, 1, {"0B0 0F0"}));
  EXPECT_TRUE(has_issue(r2, "0B0: needs 0F0 earlier on rank 0", 0, 0)) << r2.to_string();
  // Local edge taken out of order: stage 1 forward before stage 0's.
  const ValidationResult r3 = validate(from_text(1, 1, {"1F0 0F0 1B0 0B0"}, 2));
  EXPECT_TRUE(has_issue(r3, "1F0: needs 0F0 earlier on rank 0", 0, 0)) << r3.to_string();
}

TEST(ValidateTest, MPipeNeedsATransposeForEveryMicro) {
  auto lines = mpipe_lines();
  lines[1].replace(lines[1].find("0MPIPE_TRANSPOSE_FWD1 "), 22, "");
  const ValidationResult r = validate(from_text(2, 2, lines));
  EXPECT_TRUE(has_issue(r, "micro 1 has no MPIPE_TRANSPOSE_FWD")) << r.to_string();
  EXPECT_TRUE(has_issue(r, "0MPIPE_FWD_SEND1@0: needs 0MPIPE_TRANSPOSE_FWD1 earlier on rank 1")) << r.to_string();
}

TEST(ValidateTest, MPipeRemoteTransposeNeedsTheTransfer) {
  auto lines = mpipe_lines();
  lines[0].replace(lines[0].find("0MPIPE_FWD_RECV1@1 "), 19, "");
  lines[1].replace(lines[1].find("0MPIPE_FWD_SEND1@0 "), 19, "");
  const ValidationResult r = validate(from_text(2, 2, lines));
  EXPECT_TRUE(has_issue(r, "micro 1 is transposed on rank 1 but that rank has no 0MPIPE_FWD_SEND1@0", 1))
      << r.to_string();
  EXPECT_TRUE(has_issue(r, "but rank 0 has no 0MPIPE_FWD_RECV1@1", 0)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "0F1: needs 0MPIPE_FWD_RECV1@1 earlier on rank 0")) << r.to_string();
}

TEST(ValidateTest, MPipeTransposeBackwardOrder) {
  // TRANSPOSE_BWD1 before BWD(0, 1), and without the graph it recomputes from.
  const ValidationResult r = validate(from_text(
      2, 2,
      {
          "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_FWD_RECV1@1 "
          "0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0MPIPE_TRANSPOSE_BWD1 0RECV_B1@1 0B1 0MPIPE_TRANSPOSE_BWD1",
          "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 "
          "1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0",
      }));
  EXPECT_TRUE(has_issue(r, "0MPIPE_TRANSPOSE_BWD1: appears twice (first at rank 0 position 9)", 0, 12)) << r.to_string();
  EXPECT_TRUE(has_issue(r, "0MPIPE_TRANSPOSE_BWD1: needs 0B1 earlier on rank 0, but it comes later", 0, 9))
      << r.to_string();
  EXPECT_TRUE(has_issue(r, "0MPIPE_TRANSPOSE_BWD1: needs 0MPIPE_GRAPH_RECV1@1 earlier on rank 0, but the schedule has none"))
      << r.to_string();
}

TEST(ValidateTest, MPipeLocalTransposeNeedsNoTransfer) {
  const ValidationResult r = validate(from_text(1, 1, {"0MPIPE_TRANSPOSE_FWD0 0F0 0B0 0MPIPE_TRANSPOSE_BWD0"}));
  EXPECT_TRUE(r.ok()) << r.to_string();
  const ValidationResult bad = validate(from_text(1, 1, {"0F0 0MPIPE_TRANSPOSE_FWD0 0B0"}));
  EXPECT_TRUE(has_issue(bad, "0F0: needs 0MPIPE_TRANSPOSE_FWD0 earlier on rank 0, but it comes later")) << bad.to_string();
}

TEST(ValidateTest, MPipeOwnerBackward) {
  const Schedule good = testing::owner_backward_pp2();
  EXPECT_TRUE(validate(good).ok()) << validate(good).to_string();
  // A rank that skips the reduction leaves everyone else waiting in it.
  Schedule bad = good;
  bad.ranks[1].pop_back();
  const ValidationResult r = validate(bad);
  EXPECT_TRUE(has_issue(r, "rank 1 posts 1 collectives, rank 0 posts 2")) << r.to_string();
  EXPECT_TRUE(has_issue(r, "deadlock: rank 0 at 13 (0MPIPE_GRAD_REDUCE) waits for every rank to post collective #1; "
                           "rank 1 has finished"))
      << r.to_string();
}

TEST(ValidateTest, CollectivesMustAgreeInOrder) {
  const ValidationResult r = validate(from_text(
      2, 1,
      {
          "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0F0 0SEND_F0@1 0RECV_B0@1 0B0 0MPIPE_GRAD_REDUCE",
          "0MPIPE_GRAD_REDUCE 1RECV_F0@0 1F0 1B0 1SEND_B0@0 0MPIPE_PARAM_BROADCAST",
      }));
  EXPECT_TRUE(has_issue(r, "0MPIPE_GRAD_REDUCE: collective #0 differs from rank 0's (0MPIPE_PARAM_BROADCAST", 1, 0))
      << r.to_string();
}

TEST(ValidateTest, CapsTheNumberOfIssues) {
  Schedule s = one_f_one_b(2, 300);
  for (auto& a : s.ranks[1])
    if (a.type == ActionType::FWD) a.stage = 0;  // 300 forwards on the wrong rank
  const ValidationResult r = validate(s);
  ASSERT_EQ(r.issues.size(), 201u);
  EXPECT_EQ(r.issues.back().message, "... and 100 more issues");
}

TEST(ValidateTest, AcceptsEveryGeneratedLayout) {
  int checked = 0;
  for (ScheduleKind kind : {ScheduleKind::NoPipelining, ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved, ScheduleKind::MPipe})
    for (int pp = 1; pp <= 5; ++pp)
      for (int vpp = 1; vpp <= 3; ++vpp)
        for (int mb : {1, 2, 3, 5, 8, 11})
          for (int variant = 0; variant < (kind == ScheduleKind::MPipe ? 8 : 1); ++variant) {
            ScheduleOptions o;
            o.kind = kind;
            o.pp = pp;
            o.vpp = vpp;
            o.micro_batches = mb;
            o.mpipe.transpose_layers = variant & 1;
            o.mpipe.overflow = variant & 2 ? Overflow::Min : Overflow::Full;
            o.mpipe.owner_backward = (variant & 4) && o.mpipe.transpose_layers > 0;
            o.mpipe.frozen_preprocess = (variant & 4) && o.mpipe.transpose_layers == 0;
            try {
              check_options(o);
            } catch (const std::invalid_argument&) {
              continue;  // a layout the generator refuses (e.g. 1F1B with vpp > 1)
            }
            const ValidationResult r = validate(generate(o));
            EXPECT_TRUE(r.ok()) << kind_name(kind) << " pp " << pp << " vpp " << vpp << " mb " << mb << " variant "
                                << variant << "\n"
                                << r.to_string();
            ++checked;
          }
  EXPECT_GT(checked, 300);
}

// Linear work, counted in operations, which a loaded machine cannot skew as it does CPU time;
// bench_schedule's BM_Validate gives the speed. The other checks are single passes over the
// actions and the (stage, micro) cells with constant-time lookups; the blocking-rendezvous run is
// the one search whose length depends on the schedule's shape, and it counts its own work.
TEST(ValidateTest, LargeScheduleTakesLinearWork) {
  const Schedule s = one_f_one_b(64, 2048);  // about 780k actions
  std::int64_t actions = 0;
  for (const auto& rank : s.ranks) actions += static_cast<std::int64_t>(rank.size());
  const ValidationResult r = validate(s);
  EXPECT_TRUE(r.ok()) << r.to_string();
  std::int64_t operations = 0;
  EXPECT_TRUE(check_communication(s, &operations).empty());
  // Every action stepped over or posted once, and a rank visited again only when one of its
  // batches completes: at most 2 x actions + ranks (comm_check.hpp).
  EXPECT_GE(operations, actions);
  EXPECT_LE(operations, 2 * actions + 64);
}

}  // namespace
}  // namespace hp::schedule
