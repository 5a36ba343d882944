// A job over two "hosts" on one machine: node 0's launcher hosts the store on
// 127.0.0.2 (that address alone), Gloo on lo. Two `hyperpipe train --nnodes
// 2` launchers of two ranks each follow the loss curve of one process. With
// --max-restarts, a rank of node 1 killed and then node 1's launcher killed
// with -9 and started again (as a supervisor would) restart the whole job on
// both nodes, which ends on the uninterrupted curve with the same final
// checkpoint, byte for byte. A launcher that does not come back ends the job
// after the rendezvous timeout, naming its node; a launcher's SIGTERM ends
// every node without a restart; flags that differ between the nodes and bad
// node flags are refused.
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

TEST(TrainMultiNode, ARankAndThenALauncherKilledRestartTheJobOnBothNodesOnTheSameCurve) {
  const std::string dir = fresh_dir("multinode_restart");
  const std::string job = " --schedule 1f1b --steps 8 --save-interval 3";
  const auto ref = train("--nproc 4" + job + " --save " + dir + "/ref", dir + "/ref.jsonl");
  ASSERT_EQ(ref.size(), 8u);
  const int port = launch::pick_free_port("127.0.0.2");
  // Rank 3 (node 1) is killed at step 2 of the first start; once the restarted job has saved step 3,
  // node 1's launcher is killed with -9 and, a second later, started again.
  const std::string args = job + " --save " + dir + "/ck --max-restarts 3 --rendezvous-timeout 60 --inject-fault 3:2:kill"
                           " --metrics " + dir + "/m.jsonl";
  const auto r = run_script(dir, "restart",
      node_command(1, port, args) + " > " + dir + "/node1.log 2>&1 & N1=$!; (" + node_command(0, port, args) + " > " +
          dir + "/node0.log 2>&1; echo node0 exit $? >> " + dir + "/node0.log) & N0=$!; " +
          "until [ -d " + dir + "/ck/step-3 ]; do sleep 0.05; if ! kill -0 $N0 2>/dev/null; then break; fi; done; "
          "kill -9 $N1; sleep 1; " + node_command(1, port, args) + " > " + dir + "/node1b.log 2>&1; "
          "echo node1 exit $?; wait $N0",
      300);
  const std::string node0 = slurp(dir + "/node0.log");
  EXPECT_NE(r.output.find("node1 exit 0"), std::string::npos) << r.output << slurp(dir + "/node1b.log");
  ASSERT_NE(node0.find("node0 exit 0"), std::string::npos) << node0;
  // Node 0 names node 1's rank, which it learns from the store, and then node 1's launcher.
  EXPECT_NE(node0.find("hyperpipe launch: restart 1 of 3 after rank 3 failed with signal 9 (SIGKILL)"),
            std::string::npos)
      << node0;
  EXPECT_NE(node0.find("hyperpipe launch: restart 2 of 3 after node 1's launcher was lost (its connection to the "
                       "store closed)"),
            std::string::npos)
      << node0;
  EXPECT_NE(node0.find("hyperpipe train: restart 2 after node 1's launcher was lost"), std::string::npos) << node0;
  expect_same_curve(read_losses(dir + "/m.jsonl"), ref);
  expect_same_checkpoint(dir + "/ref/step-8", dir + "/ck/step-8");
}

TEST(TrainMultiNode, ALauncherThatDoesNotComeBackEndsTheJobNamingItsNode) {
  const std::string dir = fresh_dir("multinode_kill");
  const int port = launch::pick_free_port("127.0.0.2");
  const std::string args = "--steps 100000 --max-restarts 2 --rendezvous-timeout 3";
  // Once node 0 shows a step, node 1's launcher is killed with -9 (its ranks die with it) for good.
  const auto r = run_script(dir, "kill",
      node_command(1, port, args) + " > " + dir + "/node1.log 2>&1 & N1=$!; " + node_command(0, port, args) + " > " +
          dir + "/node0.log 2>&1 & N0=$!; " + "until grep -q 'step 2/' " + dir +
          "/node0.log; do sleep 0.1; if ! kill -0 $N0 2>/dev/null; then break; fi; done; kill -9 $N1; wait $N0; "
          "echo node0 exit $?",
      240);
  const std::string node0 = slurp(dir + "/node0.log");
  EXPECT_NE(r.output.find("node0 exit 1"), std::string::npos) << r.output << "\n" << node0;
  EXPECT_NE(node0.find("hyperpipe launch: node 1's launcher was lost (its connection to the store closed); stopping "
                       "this node's ranks"),
            std::string::npos)
      << node0;
  EXPECT_NE(node0.find("hyperpipe launch: node 1's launcher did not join restart 1 within the rendezvous timeout of "
                       "3 s; ending the job"),
            std::string::npos)
      << node0;
  EXPECT_EQ(node0.find("restart 2 of 2"), std::string::npos) << node0;
}

// The launcher's own SIGTERM ends every node's job, restarts or not.
TEST(TrainMultiNode, ALaunchersSigtermEndsEveryNodeWithoutARestart) {
  const std::string dir = fresh_dir("multinode_sigterm");
  const int port = launch::pick_free_port("127.0.0.2");
  auto launcher = [&](int node) {
    return hyperpipe() + " launch --nnodes 2 --node-rank " + std::to_string(node) +
           " --nproc 1 --master-addr 127.0.0.2 --master-port " + std::to_string(port) +
           " --max-restarts 2 -- sh -c 'echo up; exec sleep 60' > " + dir + "/node" + std::to_string(node) + ".log 2>&1";
  };
  const auto r = run_script(dir, "sigterm",
      launcher(1) + " & N1=$!; " + launcher(0) + " & N0=$!; until grep -q up " + dir + "/node0.log && grep -q up " +
          dir + "/node1.log; do sleep 0.05; done; kill -TERM $N1; wait $N1; echo node1 exit $?; wait $N0; "
          "echo node0 exit $?",
      120);
  const std::string node0 = slurp(dir + "/node0.log");
  EXPECT_NE(r.output.find("node1 exit 143"), std::string::npos) << r.output << slurp(dir + "/node1.log");
  EXPECT_NE(r.output.find("node0 exit 1"), std::string::npos) << r.output << node0;
  EXPECT_NE(node0.find("hyperpipe launch: node 1's launcher got SIGTERM; stopping this node's ranks"), std::string::npos)
      << node0;
  EXPECT_EQ(node0.find("restart 1"), std::string::npos) << node0;
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
