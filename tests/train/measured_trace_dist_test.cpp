// The measured trace (train/measured_trace.hpp) of several real processes
// (measured_trace_worker through launch_local): rank 0 alone writes the Chrome
// trace, with every rank's events on that rank's track, each moved onto rank
// 0's clock by the rank's offset. (One process's trace and timeline:
// measured_trace_test.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "launch/launcher.hpp"

namespace {

TEST(MeasuredTraceDist, RankZeroWritesEveryRanksEventsOnItsTrackOnRankZerosClock) {
  const std::string file = ::testing::TempDir() + "hp_measured_trace_dist_" + std::to_string(::getpid()) + ".json";
  std::remove(file.c_str());
  hp::launch::LaunchOptions o;
  o.nproc = 3;
  o.command = {std::string(HP_BIN_DIR) + "/measured_trace_worker", file};
  o.extra_env = {{"HP_TIMEOUT_S", "30"}, {"OMP_NUM_THREADS", "1"}};
  o.shutdown_grace = std::chrono::seconds(2);
  o.job_timeout = std::chrono::seconds(120);
  std::string output;
  o.on_output = [&](const hp::launch::LaunchOutput& l) { output += l.formatted() + "\n"; };
  ASSERT_EQ(hp::launch::launch_local(o), 0) << output;
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(output.find("[rank " + std::to_string(r) + "] rank " + std::to_string(r) + ": ok"), std::string::npos) << output;
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const auto trace = nlohmann::json::parse(text.str());
  // Rank r's forward began 1000 r µs after the common instant on its clock,
  // which runs 250 r µs ahead of rank 0's: 750 r µs after rank 0's forward.
  int forwards = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const int tid = e.at("tid").get<int>();
    SCOPED_TRACE(e.dump());
    EXPECT_EQ(e.at("name"), "F on rank " + std::to_string(tid));
    EXPECT_NEAR(e.at("ts").get<double>(), 750.0 * tid, 1e-3);
    EXPECT_NEAR(e.at("dur").get<double>(), 500.0, 1e-3);
    ++forwards;
  }
  EXPECT_EQ(forwards, 3) << trace.dump(1);
}

}  // namespace
