// The heartbeat (comm/heartbeat.hpp) with real processes: each test starts
// heartbeat_worker ranks through launch_local (a fresh store per test: a file,
// or a TCP store on a free port that rank 0 hosts) and reads the surveys they
// print. A healthy group is not flagged and its positions and longest receive
// are named; a stopped peer is named by every survivor, and a failed one as
// failed; rank 0, whose store goes when it exits, waits for its peers'
// surveys; and a store that does not answer is reported, not waited for.
// The workers wait for events (a message, a stopped process), never for time;
// the launcher's job timeout bounds every test.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "worker_run.hpp"

using namespace hp::launch;
using namespace hp::testing;

namespace {

// The job's bound: the ranks' start and meeting on a loaded machine, and a
// survey that does not answer (about 11 s), many times over.
constexpr double kHeartbeatJobTimeoutS = 120;

WorkerRun run_heartbeat(int nproc, const std::string& scenario, bool store_file = true) {
  return run_workers({"heartbeat_worker", {scenario}, nproc, 20, kHeartbeatJobTimeoutS, store_file});
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

TEST(HeartbeatDist, AHealthyGroupIsNotFlaggedAndItsPositionsAndLongestReceiveAreNamed) {
  const WorkerRun r = run_heartbeat(3, "healthy");
  expect_every_rank_ok(r, 3, "healthy");
  for (int surveyor : {0, 2}) {
    const std::string survey = r.of(surveyor);
    const std::string me = "rank " + std::to_string(surveyor) + ": ";
    EXPECT_TRUE(contains(survey, me + "every rank still beats\n")) << r.all();
    EXPECT_TRUE(contains(survey, me + "where every rank was (as of its last heartbeat; one every 1.0 s):\n")) << r.all();
    EXPECT_TRUE(contains(survey, "  rank " + std::to_string(surveyor) + "   this rank        step 7, action " +
                                     std::to_string(surveyor + 1) + " of 5 (work of rank " + std::to_string(surveyor) + ")"))
        << r.all();
  }
  // Rank 0's survey lasted until rank 1's wait for it showed: the one receive, with its peer.
  const std::string survey = r.of(0);
  EXPECT_TRUE(contains(survey, "rank 0: longest unmatched receive: rank 1 at step 7, action 2 of 5 (work of rank 1) has waited "))
      << r.all();
  EXPECT_TRUE(contains(survey, " for recv go from rank 0 (tag 1)\n")) << r.all();
  EXPECT_TRUE(contains(survey, "  rank 1   alive            step 7, action 2 of 5 (work of rank 1), waiting ")) << r.all();
  EXPECT_TRUE(contains(survey, "  rank 2   alive            step 7, action 3 of 5 (work of rank 2)")) << r.all();
  EXPECT_FALSE(r.has("not responding")) << r.all();
  EXPECT_FALSE(r.has("NOT RESPONDING")) << r.all();
  EXPECT_FALSE(r.has("stuck")) << r.all();
  EXPECT_FALSE(r.has("STUCK")) << r.all();
}

TEST(HeartbeatDist, AStoppedPeerIsNamedByEverySurvivorAndAFailedOneAsFailed) {
  const WorkerRun r = run_heartbeat(3, "stopped_peer");
  expect_every_rank_ok(r, 3, "stopped_peer");
  EXPECT_TRUE(r.has("[rank 2] rank 2: stopping")) << r.all();
  for (int surveyor : {0, 1}) {
    const std::string survey = r.of(surveyor);
    const std::string me = "rank " + std::to_string(surveyor) + ": ";
    EXPECT_TRUE(contains(survey, me + "rank 2 is not responding (dead or stopped): no heartbeat for ")) << r.all();
    EXPECT_TRUE(contains(survey, "  rank 2   NOT RESPONDING   step 4")) << r.all();
    EXPECT_TRUE(contains(survey, "; last heartbeat ")) << r.all();
    // Nobody else is blamed.
    for (int other : {0, 1})
      EXPECT_FALSE(contains(survey, "rank " + std::to_string(other) + " is not responding")) << r.all();
    EXPECT_FALSE(contains(survey, "every rank still beats")) << r.all();
  }
  // Rank 0 sees rank 1's failure as a failure (not as a rank gone silent), with its message.
  EXPECT_TRUE(contains(r.of(0), "  rank 1   failed           step 4, action 2 of 4 (work of rank 1); failed: "
                                "injected failure on rank 1\n"))
      << r.all();
}

TEST(HeartbeatDist, RankZeroHostingTheStoreWaitsUntilItsPeersHaveSurveyedTheJob) {
  const WorkerRun r = run_heartbeat(2, "rank0_waits_for_peers", /*store_file=*/false);
  expect_every_rank_ok(r, 2, "rank0_waits_for_peers");
  EXPECT_TRUE(r.has("[rank 0] rank 0: its peers are done with the store")) << r.all();
  // Rank 1's survey read the store to its end (rank 0 had not left with it), and names the failure.
  const std::string survey = r.of(1);
  EXPECT_TRUE(contains(survey, "rank 1: every rank still beats; rank 0 failed first: injected failure on rank 0\n")) << r.all();
  EXPECT_TRUE(contains(survey, "  rank 0   failed           step 2; failed: injected failure on rank 0\n")) << r.all();
  EXPECT_FALSE(contains(survey, "cannot be read")) << r.all();
  EXPECT_FALSE(contains(survey, "did not answer")) << r.all();
}

TEST(HeartbeatDist, AStoreThatDoesNotAnswerIsReportedNotWaitedFor) {
  const WorkerRun r = run_heartbeat(2, "store_stopped", /*store_file=*/false);
  // Rank 1's report_failure() and diagnose() returned (it printed its survey and resumed rank 0).
  expect_every_rank_ok(r, 2, "store_stopped");
  const std::string survey = r.of(1);
  EXPECT_TRUE(contains(survey, "rank 1: the job's store, hosted by rank 0, ")) << r.all();
  EXPECT_TRUE((contains(survey, "cannot be read (") &&
               contains(survey, "): rank 0 has died, stopped or already exited after a failure of its own\n")) ||
              (contains(survey, "did not answer within ") && contains(survey, ": rank 0 is stopped or stuck\n")))
      << r.all();
}
