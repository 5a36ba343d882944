// The launchers of a job over several nodes, in one process: node 0's
// NodeGroup hosts the store. Every node enters a start together; the first
// failure recorded is the start's; a launcher lost (its connection closed
// without goodbye) fails its start, and one started again at once joins the
// start after it, even before the others have entered it; a node that does
// not come is named after the rendezvous timeout.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "launch/launcher.hpp"
#include "launch/node_group.hpp"

using namespace hp::launch;

namespace {

LaunchOptions node(int rank, int port, double timeout_s = 20) {
  LaunchOptions o;
  o.nnodes = 2;
  o.node_rank = rank;
  o.master_addr = "127.0.0.2";
  o.master_port = port;
  o.rendezvous_timeout_s = timeout_s;
  o.command = {"true"};
  return o;
}

const auto never = [] { return false; };

// Both nodes enter their next start together; returns the starts entered.
std::pair<int, int> begin_both(NodeGroup& a, NodeGroup& b) {
  auto other = std::async(std::launch::async, [&] { return b.begin(never); });
  const auto first = a.begin(never);
  const auto second = other.get();
  EXPECT_TRUE(first && second);
  return {first.value_or(-1), second.value_or(-1)};
}

TEST(NodeGroup, NodesEnterEachStartTogetherAndTheFirstFailureIsTheStarts) {
  const int port = pick_free_port("127.0.0.2");
  NodeGroup zero(node(0, port));
  NodeGroup one(node(1, port));
  EXPECT_EQ(begin_both(zero, one), std::make_pair(0, 0));
  EXPECT_EQ(NodeGroup::rank_prefix(0), "start/0/");
  EXPECT_FALSE(zero.failure());
  const auto recorded = one.fail(StartFailure{"rank 3 failed with signal 9 (SIGKILL)", true, 42});
  EXPECT_EQ(recorded.reason, "rank 3 failed with signal 9 (SIGKILL)");
  const auto second = zero.fail(StartFailure{"rank 0 failed with exit code 1", true, 43});
  EXPECT_EQ(second.reason, recorded.reason) << "the first failure recorded is the start's";
  EXPECT_EQ(second.failed_at_ms, 42);
  EXPECT_EQ(begin_both(zero, one), std::make_pair(1, 1));
  EXPECT_EQ(zero.previous_failure().value_or(StartFailure{}).reason, recorded.reason);
  EXPECT_FALSE(zero.failure());
  // Both done: the job ends.
  auto done = std::async(std::launch::async, [&] { return one.finish(never); });
  EXPECT_TRUE(zero.finish(never));
  EXPECT_TRUE(done.get());
}

TEST(NodeGroup, ALostLauncherFailsItsStartAndOneStartedAgainJoinsTheNext) {
  const int port = pick_free_port("127.0.0.2");
  NodeGroup zero(node(0, port));
  auto one = std::make_unique<NodeGroup>(node(1, port));
  EXPECT_EQ(begin_both(zero, *one), std::make_pair(0, 0));
  one.reset();  // its connection closes without goodbye, as a kill -9 closes it
  // Started again at once, before node 0 has even seen the loss.
  NodeGroup again(node(1, port));
  for (int i = 0; i < 200 && !zero.failure(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto f = zero.failure();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->reason, "node 1's launcher was lost (its connection to the store closed)");
  EXPECT_TRUE(f->restartable);
  EXPECT_GT(f->failed_at_ms, 0);
  EXPECT_EQ(begin_both(zero, again), std::make_pair(1, 1));
}

TEST(NodeGroup, ANodeThatDoesNotComeIsNamedAfterTheRendezvousTimeout) {
  const int port = pick_free_port("127.0.0.2");
  NodeGroup zero(node(0, port, 0.3));
  try {
    zero.begin(never);
    ADD_FAILURE() << "began without node 1";
  } catch (const NodeGroupTimeout& e) {
    EXPECT_STREQ(e.what(), "node 1's launcher did not join the job's start within the rendezvous timeout of 0.3 s");
  }
  bool asked = false;
  NodeGroup zero_again(node(0, pick_free_port("127.0.0.2")));
  EXPECT_FALSE(zero_again.begin([&] { return asked = true; })) << "an interrupted wait returns nothing";
  EXPECT_TRUE(asked);
}

}  // namespace
