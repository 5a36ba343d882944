// `hyperpipe train --trace --timeline --simulate` end to end: the last step
// measured on every rank, as a Chrome trace and as a timeline drawn above the
// step simulated from the measured costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "train_run.hpp"

namespace hp::testing {
namespace {

// --trace and --timeline: the last step measured on every rank. With 2
// ranks, 1F1B and 4 micro-batches each rank runs 4 forwards and 4 backwards
// and posts 8 messages (an activation or a gradient of 2 x 16 x 32 floats,
// 4 KiB, each); the receiving actions wait for them, and the step for its
// last sends and its reductions; the timeline draws the
// measured step above the one simulated from the measured costs.
TEST(TrainDist, TheLastStepIsTracedOnEveryRankAndDrawnNextToItsSimulation) {
  const std::string dir = fresh_dir("trace");
  const auto r = run_command(hyperpipe() + " train --nproc 2 --schedule 1f1b --layers 4 --hidden 32 --heads 2"
                                 " --seq-len 16 --micro-batch-size 2 --mb 4 --steps 2 --emulate-layer-ms 2 --trace " +
                                 dir + "/t.json --timeline " + dir + "/t.svg --simulate",
                             120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto trace = nlohmann::json::parse(slurp(dir + "/t.json"));
  std::map<int, std::map<std::string, int>> count;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const int rank = e.at("tid").get<int>();
    const std::string cat = e.at("cat").get<std::string>();
    ++count[rank][cat];
    EXPECT_GE(e.at("dur").get<double>(), 0);
    if (cat == "wait" && e.at("name").get<std::string>().rfind("wait ", 0) == 0) {
      EXPECT_EQ(e.at("args").at("bytes").get<int>(), 2 * 16 * 32 * 4) << e.dump();
    }
    if (cat == "compute" && e.at("name").get<std::string>().find('F') != std::string::npos) {
      EXPECT_GE(e.at("dur").get<double>(), 2 * 1000) << e.dump();  // two emulated layers of 2 ms
    }
  }
  for (int rank : {0, 1}) {
    EXPECT_EQ(count[rank]["compute"], 8) << trace.dump();
    EXPECT_EQ(count[rank]["post"], 8) << trace.dump();
    EXPECT_EQ(count[rank]["wait"], 6) << trace.dump();  // 4 receives, the last sends, the reductions
  }
  const std::string svg = slurp(dir + "/t.svg");
  EXPECT_NE(svg.find(">measured<"), std::string::npos);
  EXPECT_NE(svg.find(">simulated with the measured per-stage costs<"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 50, true);
  EXPECT_NE(run_command(hyperpipe() + " train --nproc 2 --simulate").output.find(
                "--simulate needs --timeline FILE.svg"),
            std::string::npos);
  EXPECT_NE(run_command(hyperpipe() + " train --nproc 4 --dp 2 --schedule 1f1b --timeline " + dir + "/x.svg").output.find(
                "--timeline draws one pipeline; with --dp, --tp or --cp use --trace"),
            std::string::npos);
}

}  // namespace
}  // namespace hp::testing
