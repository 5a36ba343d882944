// Multi-process tests: each test starts comm_worker ranks through
// launch_local (a fresh store on a free port per test) and checks their
// output. Timeouts are short, and the launcher's job_timeout bounds every test.
// No test bounds its wall-clock time: a loaded machine stretches the ranks'
// start without limit. A failure must come from the mechanism it names (its
// message says a timeout or a closed connection), and within the job timeout,
// which is the configured timeout plus a start-up allowance.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "worker_run.hpp"

using namespace hp::launch;
using namespace hp::testing;

namespace {

// Time for the ranks to start and meet on a loaded machine, on top of the
// configured timeout, before the launcher stops the job (exit code 124).
constexpr double kStartupAllowanceS = 30;

// The launcher's ranks on one host exchange messages through shared memory
// (comm/shm_links.hpp) unless `shared_memory` is false: then over Gloo.
WorkerRun run_worker(int nproc, const std::string& scenario, double timeout_s = 20, bool shared_memory = true) {
  return run_workers({"comm_worker", {scenario}, nproc, timeout_s, timeout_s + kStartupAllowanceS, true, shared_memory});
}

// The job ended by itself, not by the launcher's job timeout: a rank that waits past its own
// timeout (or forever) runs into that and fails here.
void expect_ended_by_itself(const WorkerRun& r) {
  EXPECT_NE(r.code, 124) << r.all();
  EXPECT_FALSE(r.has("did not finish within its timeout")) << r.all();
}

}  // namespace

class CommDist : public ::testing::TestWithParam<int> {};

TEST_P(CommDist, RingWithTagsBothDirections) { expect_every_rank_ok(run_worker(GetParam(), "ring"), GetParam(), "ring"); }
TEST_P(CommDist, RingWithTagsBothDirectionsOverGloo) {
  expect_every_rank_ok(run_worker(GetParam(), "ring", 20, false), GetParam(), "ring");
}
TEST_P(CommDist, BroadcastThenAllReduce) {
  WorkerRun r = run_worker(GetParam(), "broadcast,all_reduce");
  expect_every_rank_ok(r, GetParam(), "broadcast");
  expect_every_rank_ok(r, GetParam(), "all_reduce");
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommDist, ::testing::Values(2, 3, 4));

TEST(CommDistP2P, ActivationAndGradientBetweenTheSameTwoRanks) {
  expect_every_rank_ok(run_worker(2, "pp2_hazard"), 2, "pp2_hazard");
}

TEST(CommDistP2P, VariableShapesWithMeta) { expect_every_rank_ok(run_worker(3, "meta"), 3, "meta"); }

TEST(CommDistP2P, DtypesAreBitExact) { expect_every_rank_ok(run_worker(2, "dtypes"), 2, "dtypes"); }

TEST(CommDistP2P, MessagesLargerThanASharedMemoryRingStreamThroughIt) {
  expect_every_rank_ok(run_worker(2, "streamed"), 2, "streamed");
}

TEST(CommDistP2P, VariableShapesWithMetaOverGloo) { expect_every_rank_ok(run_worker(3, "meta", 20, false), 3, "meta"); }

TEST(CommDistP2P, ClientsWaitForALateStore) {
  WorkerRun r = run_worker(3, "late_master", 10);
  expect_every_rank_ok(r, 3, "late_master");
}

TEST(CommDistMesh, EveryGroupOfTp2Dp2Pp2HoldsTheRanksOfTheLayout) {
  expect_every_rank_ok(run_worker(8, "mesh"), 8, "mesh");
}

TEST(CommDistMesh, AMemberThatNeverFormsASubgroupIsNamed) {
  WorkerRun r = run_worker(3, "subgroup_no_show", 2);
  EXPECT_EQ(r.code, 1) << r.all();
  EXPECT_TRUE(r.has("rank 0: FAILED: rank 0: forming the dp group [0, 1, 2] timed out after 2 s; rank(s) 2 did not join"))
      << r.all();
  expect_ended_by_itself(r);
}

class CommDistFailureBoth : public ::testing::TestWithParam<bool> {};

// Over shared memory, the receiver finds the sender's process gone; over Gloo, its socket closed.
TEST_P(CommDistFailureBoth, ADeadPeerIsNamedQuickly) {
  const double timeout = 20;
  WorkerRun r = run_worker(3, "early_exit", timeout, GetParam());
  EXPECT_NE(r.code, 0) << r.all();
  EXPECT_TRUE(r.has("[rank 2] rank 2: leaving early")) << r.all();
  // A survivor names the action, the dead peer and itself.
  EXPECT_TRUE(r.has("rank 0: FAILED: rank 0: recv Activation(stage 2, micro 0) from rank 2 (tag ") ||
              r.has("rank 1: FAILED: rank 1: recv Activation(stage 2, micro 0) from rank 2 (tag "))
      << r.all();
  EXPECT_TRUE(r.has("hyperpipe launch: rank ")) << r.all();
  // The closed connection fails the receive, not its timeout: the error says so (a CommError
  // says "timed out after" only when its wait ran out), whatever the time the job took.
  EXPECT_TRUE(r.has(") failed: ") && r.has(" (did rank 2 exit or crash?)"))
      << "the closed connection should fail the receive before the timeout\n" << r.all();
  EXPECT_FALSE(r.has("timed out after")) << r.all();
  expect_ended_by_itself(r);
}

INSTANTIATE_TEST_SUITE_P(SharedMemory, CommDistFailureBoth, ::testing::Bool());

TEST(CommDistFailure, ARankThatNeverSendsTimesOut) {
  WorkerRun r = run_worker(2, "hang", 2);
  EXPECT_EQ(r.code, 1) << r.all();
  EXPECT_TRUE(r.has("rank 0: FAILED: rank 0: recv Gradient(stage 1, micro 3) from rank 1 (tag " +
                    std::to_string((1 << 28) | (1 << 16) | 3) + ") timed out after 2 s; is rank 1 alive?"))
      << r.all();
  EXPECT_TRUE(r.has("hyperpipe launch: rank 0 failed with exit code 1; stopping the other ranks")) << r.all();
  expect_ended_by_itself(r);
}

TEST(CommDistFailure, ACollectiveWithADeadRankFails) {
  const double timeout = 5;
  WorkerRun r = run_worker(3, "early_exit_collective", timeout);
  EXPECT_NE(r.code, 0) << r.all();
  EXPECT_TRUE(r.has(": all_reduce (sum) of 16 Float elements over 3 ranks")) << r.all();
  EXPECT_TRUE(r.has("(did another rank exit or crash?)") || r.has("timed out after 5 s")) << r.all();
  expect_ended_by_itself(r);
}

TEST(CommDistFailure, ARankThatNeverJoinsIsNamed) {
  WorkerRun r = run_worker(2, "no_show", 2);
  EXPECT_EQ(r.code, 1) << r.all();
  EXPECT_TRUE(r.has("[rank 1] rank 1: not joining")) << r.all();
  EXPECT_TRUE(r.has("rank 0: FAILED: rank 0: rendezvous at file /")) << r.all();
  EXPECT_TRUE(r.has("rank 1 of 2 did not join within 2 s (is it running, with the same HYPERPIPE_STORE_PATH?)")) << r.all();
  expect_ended_by_itself(r);
}

TEST(CommDistFailure, AMessageLargerThanItsReceiveFailsTheReceive) {
  WorkerRun r = run_worker(2, "size_mismatch", 5);
  EXPECT_EQ(r.code, 1) << r.all();
  EXPECT_TRUE(r.has("rank 1: FAILED: rank 1: recv Activation(stage 0, micro 0) from rank 0 (tag 0) failed: the message "
                    "has 48 bytes, the receive expects 40"))
      << r.all();
  expect_ended_by_itself(r);
}

TEST(CommDistFailure, AMessageLargerThanTheBufferStopsTheJobOverGloo) {
  // Gloo cannot report this to the caller: it aborts the receiver from its I/O
  // thread. What must hold is that the job stops quickly and says why.
  WorkerRun r = run_worker(2, "size_mismatch", 5, false);
  EXPECT_NE(r.code, 0) << r.all();
  EXPECT_TRUE(r.has("op.preamble.length <= op.nbytes. 48 vs 40")) << r.all();
  // Usually "rank 1 failed with signal 6 (SIGABRT)"; rank 0's failed barrier
  // may be reaped in the same instant and reported first.
  EXPECT_TRUE(r.has("hyperpipe launch: rank 1 failed with signal 6 (SIGABRT)") ||
              r.has("hyperpipe launch: rank 0 failed with exit code 1"))
      << r.all();
  expect_ended_by_itself(r);
}
