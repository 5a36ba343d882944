// A job that survives its faults (--max-restarts): a rank killed (SIGKILL),
// stopped (SIGSTOP, found by the heartbeat) or killed half-way through a save
// makes the launcher start every rank again from --save's newest complete
// checkpoint, and the job ends on the uninterrupted run's curve with the same
// final checkpoint, byte for byte. A fault at every start stops after the
// restarts; a full disk ends the job without one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "train_run.hpp"

namespace hp::testing {
namespace {

namespace fs = std::filesystem;

const std::string kJob = " --nproc 2 --schedule 1f1b --steps 8 --save-interval 3 --timeout 6";

// The metrics line of `step`.
nlohmann::json metrics_line(const std::string& path, long step) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("step", -1L) == step) return j;
  }
  return {};
}

TEST(TrainRestart, AKilledStoppedOrMidSaveKilledRankRestartsFromLatestOnTheSameCurve) {
  const std::string dir = fresh_dir("restart");
  const auto ref = train(kJob + " --save " + dir + "/ref", dir + "/ref.jsonl");
  ASSERT_EQ(ref.size(), 8u);
  // (fault, the step of the checkpoint the restart resumes from, the failure it names)
  const std::vector<std::tuple<std::string, int, std::string>> faults = {
      {"1:5:kill", 3, "rank 1 failed with signal 9 (SIGKILL)"},
      {"1:5:stop", 3, "rank 1 is not responding (dead or stopped), found by rank 0"},
      {"0:6:killsave", 3, "rank 0 failed with signal 9 (SIGKILL)"}};
  for (const auto& [fault, resumed, reason] : faults) {
    const std::string name = fault.substr(fault.rfind(':') + 1), metrics = dir + "/" + name + ".jsonl";
    const auto r = run_command(hyperpipe() + " train" + kModel + kJob + " --save " + dir + "/" + name +
                                   " --max-restarts 2 --inject-fault " + fault + " --metrics " + metrics,
                               300);
    ASSERT_EQ(r.exit_code, 0) << fault << "\n" << r.output;
    EXPECT_NE(r.output.find("hyperpipe launch: restart 1 of 2 after " + reason + ": starting every rank again"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("restart 2 of 2"), std::string::npos) << r.output;
    const std::string resumed_line = "hyperpipe train: restart 1 after rank ";
    const auto at = r.output.find(resumed_line);
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    EXPECT_NE(line.find(": resumed from the checkpoint of step " + std::to_string(resumed) +
                        "; its first step starts "),
              std::string::npos)
        << line;
    // One line per step across the restart, on the uninterrupted curve, the
    // first resumed one saying what happened.
    expect_same_curve(read_losses(metrics), ref);
    const auto first = metrics_line(metrics, resumed + 1);
    EXPECT_EQ(first.value("restart", 0.0), 1.0) << first.dump();
    EXPECT_EQ(first.value("resumed_from_step", 0.0), resumed) << first.dump();
    EXPECT_GT(first.value("recovery_s", -1.0), 0.0) << first.dump();
    EXPECT_EQ(first.value("restart_reason", std::string()), reason) << first.dump();
    expect_same_checkpoint(dir + "/ref/step-8", dir + "/" + name + "/step-8");
  }
}

// A fault at every start is not a loop: the job ends after the restarts with
// the rank's status; a full disk (train.save_failures stop) ends it at once.
TEST(TrainRestart, AFaultAtEveryStartEndsAfterTheRestartsAndAFullDiskAtOnce) {
  const std::string dir = fresh_dir("restart_end");
  const auto every = run_command(hyperpipe() + " train" + kModel + kJob + " --save " + dir + "/every" +
                                     " --max-restarts 1 --inject-fault 1:2:exit:every",
                                 300);
  EXPECT_EQ(every.exit_code, 17) << every.output;
  EXPECT_NE(every.output.find("hyperpipe launch: restart 1 of 1 after rank 1 failed with exit code 17"),
            std::string::npos)
      << every.output;
  EXPECT_NE(every.output.find("hyperpipe launch: giving up after 1 restart; the last: rank 1 failed "
                              "with exit code 17"),
            std::string::npos)
      << every.output;
  const auto full = run_command(hyperpipe() + " train" + kModel + kJob + " --save " + dir + "/full" +
                                    " --max-restarts 2 --inject-fault 1:3:nospace",
                                300);
  EXPECT_EQ(full.exit_code, 79) << full.output;  // launch::kExitNoRestart
  EXPECT_NE(full.output.find("No space left on device"), std::string::npos) << full.output;
  EXPECT_EQ(full.output.find("restart 1"), std::string::npos) << full.output;
}

}  // namespace
}  // namespace hp::testing
