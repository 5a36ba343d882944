// A job over two "hosts" on one machine: node 0's launcher on 127.0.0.2 (rank
// 0 hosts the store there), node 1's ranks on 127.0.0.3's side of the
// loopback, Gloo on lo. Two `hyperpipe train --nnodes 2` launchers of two
// ranks each follow the loss curve of one process; a node whose launcher is
// killed with -9 ends the other node's ranks with a line naming the lost
// ranks; flags that differ between the nodes and bad node flags are refused.
#include <gtest/gtest.h>

#include "launch/launcher.hpp"
#include "train_run.hpp"

namespace hp::testing {
namespace {

// The command of node `node` of a two-node job at 127.0.0.2:port.
std::string node_command(int node, int port, const std::string& args) {
  return "GLOO_SOCKET_IFNAME=lo " + hyperpipe() + " train" + kModel + " --timeout 30 --nnodes 2 --node-rank " +
         std::to_string(node) + " --nproc-per-node 2 --master-addr 127.0.0.2 --master-port " + std::to_string(port) +
         " " + args;
}

// Runs `script` with bash (run_command's time limit covers all of it).
CommandResult run_script(const std::string& dir, const std::string& name, const std::string& script, int timeout_s) {
  const std::string path = dir + "/" + name + ".sh";
  std::ofstream(path) << script << "\n";
  return run_command("bash " + path, timeout_s);
}

TEST(TrainMultiNode, TwoLaunchersOfTwoRanksFollowTheOneProcessCurve) {
  const std::string dir = fresh_dir("multinode");
  const int port = launch::pick_free_port("127.0.0.2");
  const std::string args = "--steps 5 --metrics " + dir + "/metrics.jsonl";
  // Node 1 in the background (its output in a file), node 0 in front; both must end well.
  const auto r = run_script(dir, "job",
                            "(" + node_command(1, port, args) + " > " + dir + "/node1.log 2>&1; echo node1 exit $? >> " +
                                dir + "/node1.log) & " + node_command(0, port, args) + "; R=$?; wait; exit $R",
                            300);
  const std::string node1 = slurp(dir + "/node1.log");
  ASSERT_EQ(r.exit_code, 0) << r.output << "\nnode 1:\n" << node1;
  EXPECT_NE(node1.find("node1 exit 0"), std::string::npos) << node1;
  EXPECT_NE(r.output.find("[rank 0] step 5/5"), std::string::npos) << r.output;
  expect_same_curve(read_losses(dir + "/metrics.jsonl"), train("--nproc 1 --steps 5", dir + "/one.jsonl"));
}

TEST(TrainMultiNode, ANodeWhoseLauncherIsKilledEndsTheOtherNodesRanks) {
  const std::string dir = fresh_dir("multinode_kill");
  const int port = launch::pick_free_port("127.0.0.2");
  const std::string args = "--steps 100000";
  // Once node 0 shows a step, node 1's launcher is killed with -9 (its ranks die with it).
  const auto r = run_script(dir, "kill",
      node_command(1, port, args) + " > " + dir + "/node1.log 2>&1 & N1=$!; " + node_command(0, port, args) + " > " +
          dir + "/node0.log 2>&1 & N0=$!; " + "until grep -q 'step 2/' " + dir +
          "/node0.log; do sleep 0.1; if ! kill -0 $N0 2>/dev/null; then break; fi; done; kill -9 $N1; wait $N0; "
          "echo node0 exit $?",
      240);
  const std::string node0 = slurp(dir + "/node0.log");
  EXPECT_NE(r.output.find("node0 exit 1"), std::string::npos) << r.output << "\n" << node0;
  EXPECT_NE(node0.find("step 2/"), std::string::npos) << node0;
  // The survivors name a rank of the lost node.
  EXPECT_TRUE(node0.find("rank 2 is not responding") != std::string::npos ||
              node0.find("rank 3 is not responding") != std::string::npos)
      << node0;
}

TEST(TrainMultiNode, DifferentFlagsOnTheNodesAndBadNodeFlagsAreRefused) {
  const std::string dir = fresh_dir("multinode_bad");
  const int port = launch::pick_free_port("127.0.0.2");
  const auto r = run_script(dir, "differ",
                            "(" + node_command(1, port, "--steps 2") + " > " + dir + "/node1.log 2>&1) & " +
                                node_command(0, port, "--steps 3") + "; R=$?; wait; exit $R",
                            120);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--nnodes: rank 2 runs another command line than rank 0 (beyond --node-rank): every node "
                          "must run the same flags"),
            std::string::npos)
      << r.output;
  auto refused = [](const std::string& args, const std::string& text) {
    const auto out = run_command(hyperpipe() + " train --steps 1 " + args);
    EXPECT_EQ(out.exit_code, 2) << args << "\n" << out.output;
    EXPECT_NE(out.output.find(text), std::string::npos) << args << "\n" << out.output;
    EXPECT_EQ(out.output.find("[rank"), std::string::npos) << "a rank started for " << args;
  };
  refused("--nnodes 2 --node-rank 2 --master-port 29500", "--node-rank 2 must be in [0, 2) (--nnodes 2)");
  refused("--nnodes 2 --node-rank 1", "--master-port: with --nnodes 2 every node's launcher must name the same port");
}

}  // namespace
}  // namespace hp::testing
