// `hyperpipe bench` end to end: measured next to simulated steps, peak bytes
// and the per-rank breakdown of one step (--overhead), on emulated devices.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.hpp"

namespace hp::testing {
namespace {

// no-pipelining in a job of 2 ranks is the single-process reference: rank 0
// runs the whole model alone. The bubble beyond the busiest rank's compute
// sits beside Megatron's (PP-1)/(v*MB).
TEST(BenchDist, EverySchedulesRowHasItsPeaksAndItsStepBrokenDownPerRank) {
  const std::string dir = fresh_dir("bench");
  const auto r = run_command(hyperpipe() + " bench --nproc 2 --layers 4 --hidden 32 --heads 2 --mb 4 --steps 1"
                                 " --schedules no-pipelining,1f1b,interleaved --emulate-layer-ms 2 --overhead --json " +
                                 dir + "/b.json",
                             120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("[rank 0] BLAS: ", 0), 0u) << r.output;  // the first line names the BLAS
  EXPECT_NE(r.output.find("where one step went"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bubble (theory)"), std::string::npos) << r.output;
  std::ifstream in(dir + "/b.json");
  const auto json = nlohmann::json::parse(in);
  EXPECT_TRUE(json.at("comm").empty());
  const auto& rows = json.at("schedules");
  ASSERT_EQ(rows.size(), 3u);
  const std::vector<int> ranks = {1, 2, 2}, layers_per_rank = {4, 2, 2};
  const std::vector<double> theory = {-1, 1.0 / 4, 1.0 / 8};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.at("pp").get<int>(), ranks[i]) << row.dump();
    EXPECT_GT(row.at("measured_ms").get<double>(), 0) << row.dump();
    EXPECT_GT(row.at("simulated_ms").get<double>(), 0) << row.dump();
    // The busiest rank computes 4 micro-batches of its layers, 2 ms forward and 4 backward each.
    EXPECT_GE(row.at("ideal_ms").get<double>(), 4 * layers_per_rank[i] * (2 + 4)) << row.dump();
    EXPECT_NEAR(row.at("bubble_over_ideal").get<double>(),
                row.at("measured_ms").get<double>() / row.at("ideal_ms").get<double>() - 1, 1e-9);
    if (theory[i] < 0) {
      EXPECT_TRUE(row.at("theory_bubble_over_ideal").is_null()) << row.dump();
    } else {
      EXPECT_DOUBLE_EQ(row.at("theory_bubble_over_ideal").get<double>(), theory[i]) << row.dump();
    }
    ASSERT_EQ(row.at("peak_bytes").size(), static_cast<size_t>(ranks[i])) << row.dump();
    ASSERT_EQ(row.at("overhead_ms").size(), static_cast<size_t>(ranks[i])) << row.dump();
    // The bubble in the traced step: its step over the compute of the rank that computes most.
    double step_of_busiest = 0, busiest = 0;
    for (const auto& rank : row.at("overhead_ms"))
      if (rank.at(1).get<double>() > busiest) busiest = rank.at(1), step_of_busiest = rank.at(0);
    EXPECT_NEAR(row.at("bubble_in_step").get<double>(), step_of_busiest / busiest - 1, 1e-9) << row.dump();
    for (const auto& rank : row.at("overhead_ms")) {
      const double step = rank.at(0), compute = rank.at(1), wait = rank.at(2), post = rank.at(3), rest = rank.at(4);
      EXPECT_GE(compute, 4 * layers_per_rank[i] * (2 + 4)) << rank.dump();
      EXPECT_GE(wait, 0) << rank.dump();
      EXPECT_GE(post, 0) << rank.dump();
      EXPECT_NEAR(compute + wait + post + rest, step, 1e-6 * step) << rank.dump();
      EXPECT_GE(rest, -0.01 * step) << rank.dump();
      EXPECT_GT(rank.at(5).get<double>(), 0) << rank.dump();  // the AdamW step
      // The actions the rank ran, and the runtime's own cost per action, us.
      const double actions = rank.at(6);
      EXPECT_GE(actions, 2 * 4) << rank.dump();  // a forward and a backward of each of 4 micro-batches at least
      EXPECT_NEAR(rank.at(7).get<double>(), 1000 * (post + rest) / actions, 1e-9 * (1 + rank.at(7).get<double>()))
          << rank.dump();
    }
  }
}

// Issue 13 parts 3 and 6: MPipe around the interleaved, 1F1B and GPipe bodies
// in the same run as 1F1B, its preprocess calibrated for the simulation.
TEST(BenchDist, MPipeRowsAroundEachBodySitBesideTheirBodies) {
  const std::string dir = fresh_dir("bench-mpipe");
  const auto r = run_command(hyperpipe() + " bench --nproc 2 --layers 4 --hidden 32 --heads 2 --mb 3 --steps 1 --vpp 1"
                                 " --transpose-layers 1 --emulate-layer-ms 2 --schedules 1f1b,mpipe,mpipe/1f1b,mpipe/gpipe"
                                 " --json " + dir + "/b.json",
                             120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mpipe/gpipe v1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fastest: measured "), std::string::npos) << r.output;
  std::ifstream in(dir + "/b.json");
  const auto rows = nlohmann::json::parse(in).at("schedules");
  ASSERT_EQ(rows.size(), 4u);
  const std::vector<std::string> names = {"1f1b", "mpipe", "mpipe/1f1b", "mpipe/gpipe"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.at("schedule").get<std::string>(), names[i]);
    EXPECT_EQ(row.at("vpp").get<int>(), 1);
    EXPECT_GT(row.at("measured_ms").get<double>(), 0) << row.dump();
    // Stage 1 alone computes 3 micro-batches of 2 layers, 2 ms forward and 4 backward each.
    EXPECT_GE(row.at("simulated_ms").get<double>(), 3 * 2 * (2 + 4)) << row.dump();
    const double pre_f = row.at("preprocess_ms").at(0), pre_b = row.at("preprocess_ms").at(1);
    if (i == 0) {
      EXPECT_EQ(row.at("transpose_layers").get<int>(), 0);
      EXPECT_EQ(pre_f, 0);
      EXPECT_TRUE(row.at("mpipe_rank0_ms").is_null()) << row.dump();
    } else {  // the transposed layer: 2 ms forward, 4 backward
      EXPECT_EQ(row.at("transpose_layers").get<int>(), 1);
      EXPECT_GE(pre_f, 2) << row.dump();
      EXPECT_GE(pre_b, 4) << row.dump();
      // Rank 0 backprops the layer of each of the 3 micro-batches and first recomputes it for
      // those rank 1 transposed (at least one): 3 x 4 + 2 ms at least, measured in a traced step;
      // 3 backwards and a recompute at least of the calibrated costs in the simulation. And it
      // broadcasts the layer every step.
      const auto& work = row.at("mpipe_rank0_ms");
      EXPECT_GE(work.at("preprocess_backward").at(0).get<double>(), 3 * 4 + 2) << row.dump();
      EXPECT_GE(work.at("preprocess_backward").at(1).get<double>(), 3 * pre_b + pre_f - 1e-9) << row.dump();
      for (int k : {0, 1}) EXPECT_GT(work.at("broadcast").at(k).get<double>(), 0) << row.dump();
    }
  }
  // Issue 13 part 4: plan --advise's pick among these layouts, beside the measured winner.
  EXPECT_NE(r.output.find("advisor (plan --advise on the emulated layer costs): first choice "), std::string::npos)
      << r.output;
  const auto advisor = nlohmann::json::parse(std::ifstream(dir + "/b.json")).at("advisor");
  const std::vector<std::string> labels = {"1f1b v1", "mpipe v1", "mpipe/1f1b v1", "mpipe/gpipe v1"};
  EXPECT_NE(std::find(labels.begin(), labels.end(), advisor.at("first_measured").get<std::string>()), labels.end())
      << advisor.dump();
  EXPECT_NE(std::find(labels.begin(), labels.end(), advisor.at("measured_fastest").get<std::string>()), labels.end())
      << advisor.dump();
  EXPECT_EQ(advisor.at("agrees").get<bool>(), advisor.at("first_measured") == advisor.at("measured_fastest"));
}

// Issue 13 part 3: the frozen-VL regime in one bench run. MPipe moves the
// whole frozen tower off rank 0; the simulation runs the layout the pipeline
// runs (frozen: no preprocess backward, no broadcast after the first step).
TEST(BenchDist, AFrozenVisionTowerIsBenchedAndSimulatedAsThePipelineRunsIt) {
  const std::string dir = fresh_dir("bench-vl");
  // A tower of 8 blocks against 2 layers: MPipe's gain (about a quarter of the step) stays well
  // clear of what a busy machine does to the calibrated costs.
  const auto r = run_command(hyperpipe() + " bench --model vl --vision-layers 8 --freeze-vision --layers 2 --nproc 2"
                                 " --mb 4 --steps 1 --emulate-layer-ms 2 --emulate-only --vpp 1 --transpose-layers 8"
                                 " --schedules 1f1b,mpipe/1f1b --json " + dir + "/b.json",
                             120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto json = nlohmann::json::parse(std::ifstream(dir + "/b.json"));
  const auto& rows = json.at("schedules");
  ASSERT_EQ(rows.size(), 2u);
  const auto& one = rows[0];
  const auto& mpipe = rows[1];
  EXPECT_GE(mpipe.at("preprocess_ms").at(0).get<double>(), 8 * 2) << mpipe.dump();  // the tower's 8 blocks
  EXPECT_LT(mpipe.at("preprocess_ms").at(1).get<double>(), 0.1) << mpipe.dump();  // frozen: no backward
  // Rank 0 runs the tower inside every forward under 1F1B; MPipe spreads it over the warm-up.
  // Each row is simulated from its own calibration, which a loaded machine skews row by row,
  // so the bound comes from the MPipe row alone: its busiest rank's work without the tower,
  // plus the MB tower forwards rank 0 would run in line under 1F1B.
  const double inline_tower = mpipe.at("ideal_ms").get<double>() + 4 * mpipe.at("preprocess_ms").at(0).get<double>();
  EXPECT_LT(mpipe.at("simulated_ms").get<double>(), inline_tower) << json.dump();
  EXPECT_EQ(one.at("preprocess_ms").at(0).get<double>(), 0.0) << one.dump();  // 1F1B: the tower is in stage 0
  EXPECT_FALSE(json.at("advisor").at("first_measured").get<std::string>().empty()) << json.dump();
  const auto bad = run_command(hyperpipe() + " bench --nproc 2 --freeze-vision");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--freeze-vision needs --model vl"), std::string::npos) << bad.output;
}

// Issue 13: src/comm's messages and broadcasts beside plain c10d's, in one run.
TEST(BenchDist, CommTimesEverySizeBesidePlainC10d) {
  const std::string dir = fresh_dir("bench-comm");
  const auto r = run_command(hyperpipe() + " bench --nproc 3 --layers 3 --hidden 16 --heads 2 --mb 3 --steps 1"
                                 " --schedules 1f1b --comm --comm-rounds 3 --json " + dir + "/b.json",
                             180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("communication: src/comm against plain c10d Gloo, medians of 3 rounds"), std::string::npos)
      << r.output;
  // Real compute: the advisor has no layer costs to go on, and says so.
  EXPECT_NE(r.output.find("advisor: not asked: it needs each layer's cost: give --emulate-layer-ms"), std::string::npos)
      << r.output;
  std::ifstream in(dir + "/b.json");
  const auto comm = nlohmann::json::parse(in).at("comm");
  std::vector<std::pair<std::string, long>> sizes;
  for (const auto& row : comm) {
    sizes.emplace_back(row.at("op").get<std::string>(), row.at("bytes").get<long>() >> 10);
    EXPECT_GT(row.at("hyperpipe_us").get<double>(), 0) << row.dump();
    EXPECT_GT(row.at("c10d_us").get<double>(), 0) << row.dump();
    // Per-round ratios: with three rounds the median is one of them.
    for (const char* key : {"ratio", "control"}) {
      const auto& s = row.at(key);
      EXPECT_GT(s.at("low").get<double>(), 0) << row.dump();
      EXPECT_LE(s.at("low").get<double>(), s.at("median").get<double>()) << row.dump();
      EXPECT_LE(s.at("median").get<double>(), s.at("high").get<double>()) << row.dump();
    }
  }
  EXPECT_EQ(sizes, (std::vector<std::pair<std::string, long>>{
                       {"p2p", 4}, {"p2p", 64}, {"p2p", 1024}, {"p2p", 16384}, {"broadcast", 1024}, {"broadcast", 16384}}));
  const auto one = run_command(hyperpipe() + " bench --nproc 1 --comm");
  EXPECT_EQ(one.exit_code, 2) << one.output;
  EXPECT_NE(one.output.find("--comm times messages between ranks: give --nproc 2 or more"), std::string::npos)
      << one.output;
}

// Issue 16: where a step's time goes, by operator, on every rank. Which operator leads depends
// on the machine's load, so the test asks for more rows than any timing can reorder out of the
// table and checks the order, not the winner.
TEST(BenchDist, EveryRankPrintsTheOperatorsOfOneStepByTheirSelfTime) {
  constexpr int kTop = 40;
  const auto r = run_command(hyperpipe() + " bench --nproc 2 --layers 4 --hidden 32 --heads 2 --mb 4 --steps 1"
                                 " --schedules 1f1b --profile-ops " + std::to_string(kTop),
                             120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string rank : {"0", "1"}) {
    const std::string prefix = "[rank " + rank + "] ";
    const std::string head = prefix + "rank " + rank + ", 1f1b v1: one step's top " + std::to_string(kTop) +
                             " operators by self time";
    const auto at = r.output.find(head);
    ASSERT_NE(at, std::string::npos) << r.output;
    // The table: a header and kTop operators in falling self time, the matrix products among them.
    std::istringstream table(r.output.substr(at));
    std::vector<std::string> rows;
    for (std::string line; std::getline(table, line) && rows.size() < kTop + 2;)
      if (line.rfind(prefix, 0) == 0) rows.push_back(line.substr(prefix.size()));
    ASSERT_EQ(rows.size(), kTop + 2u) << r.output;
    EXPECT_NE(rows[1].find("operator"), std::string::npos) << rows[1];
    bool has_mm = false;
    double previous = 1e300;
    for (int i = 2; i < kTop + 2; ++i) {
      // Columns from the right: self %, total ms, self ms, calls; the name may hold spaces.
      std::istringstream fields(rows[i]);
      std::vector<std::string> words{std::istream_iterator<std::string>(fields), {}};
      ASSERT_GE(words.size(), 5u) << rows[i];
      const double self_ms = std::stod(words[words.size() - 3]);
      EXPECT_LE(self_ms, previous) << rows[i];
      EXPECT_GE(std::stod(words[words.size() - 2]), self_ms) << rows[i];
      EXPECT_GT(std::stol(words[words.size() - 4]), 0) << rows[i];
      previous = self_ms;
      has_mm = has_mm || words[0] == "aten::mm";
    }
    EXPECT_TRUE(has_mm) << r.output;
  }
}

// Issue 14: a mesh of tp 2 x dp 2 x pp 2. Rank 0's tensor-parallel
// all-reduces in a step are as many, and as large, as the simulator prices
// (it counts them per forward and backward in calibration); the averaging over
// the replicas is measured by the same steps without it, and priced.
TEST(BenchDist, AMeshsAllReducesAreMeasuredBesideTheSimulatorsPrice) {
  const std::string dir = fresh_dir("bench-mesh");
  const auto r = run_command(hyperpipe() + " bench --nproc 8 --tp 2 --dp 2 --layers 4 --hidden 32 --heads 2 --mb 4"
                                 " --steps 1 --schedules 1f1b,interleaved --emulate-layer-ms 2 --json " + dir + "/b.json",
                             180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data parallelism (dp 2, one replica's step)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tensor parallelism (tp 2): rank 0's all-reduces in one step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("advisor: not asked: it lays out one pipeline"), std::string::npos) << r.output;
  const auto json = nlohmann::json::parse(std::ifstream(dir + "/b.json"));
  EXPECT_EQ(json.at("mesh"), (nlohmann::json{{"pp", 2}, {"dp", 2}, {"tp", 2}})) << json.dump();
  const auto& rows = json.at("schedules");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.at("pp"), 2) << row.dump();
    const auto& tp = row.at("tensor_parallel");
    ASSERT_TRUE(tp.is_object()) << row.dump();
    EXPECT_GT(tp.at("calls").at(0).get<double>(), 0) << tp.dump();
    EXPECT_EQ(tp.at("calls").at(0).get<double>(), tp.at("calls").at(1).get<double>()) << tp.dump();
    EXPECT_EQ(tp.at("bytes").at(0).get<double>(), tp.at("bytes").at(1).get<double>()) << tp.dump();
    EXPECT_GT(tp.at("ms").at(0).get<double>(), 0) << tp.dump();
    EXPECT_GT(tp.at("ms").at(1).get<double>(), 0) << tp.dump();
    const auto& dp = row.at("data_parallel");
    ASSERT_TRUE(dp.is_object()) << row.dump();
    EXPECT_GT(dp.at("grad_bytes").get<double>(), 0) << dp.dump();
    EXPECT_GT(dp.at("no_sync_ms").at(0).get<double>(), 0) << dp.dump();
    // The averaging is priced: the simulated step with it is longer than without.
    EXPECT_GT(row.at("simulated_ms").get<double>(), dp.at("no_sync_ms").at(1).get<double>()) << row.dump();
  }
}

}  // namespace
}  // namespace hp::testing
