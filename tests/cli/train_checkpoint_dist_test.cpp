// `hyperpipe train` checkpoints end to end with real local ranks: one saved by
// 4 ranks continues under 2 and 1, a damaged or foreign one is refused before
// any rank starts, --keep-last prunes, and a failed save stops the job in one
// line and leaves the latest checkpoint as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "train_run.hpp"

namespace hp::testing {
namespace {

TEST(TrainDist, CheckpointFromFourRanksContinuesUnderTwoAndOne) {
  const std::string dir = fresh_dir("ckpt");
  const auto full = train("--nproc 4 --schedule 1f1b --vpp 1 --steps 6 --tie-embeddings", dir + "/full.jsonl");
  ASSERT_EQ(full.size(), 6u);
  train("--nproc 4 --schedule 1f1b --vpp 1 --steps 3 --tie-embeddings --save " + dir + "/ck", dir + "/first.jsonl");
  const std::vector<std::pair<long, double>> tail(full.begin() + 3, full.end());
  expect_same_curve(train("--nproc 2 --schedule interleaved --vpp 2 --steps 6 --tie-embeddings --load " + dir + "/ck",
                          dir + "/pp2.jsonl"),
                    tail);
  expect_same_curve(train("--nproc 1 --schedule no-pipelining --vpp 1 --steps 6 --tie-embeddings --load " + dir + "/ck",
                          dir + "/pp1.jsonl"),
                    tail);
  // V placement (rank 0 holds the first and the last stage) from a loop checkpoint.
  expect_same_curve(train("--nproc 2 --schedule zbv --steps 6 --tie-embeddings --load " + dir + "/ck", dir + "/zbv.jsonl"),
                    tail);
  // A run that would train nothing past the checkpoint is refused before any rank starts.
  const auto none = run_command(hyperpipe() + " train --nproc 2 --schedule 1f1b --vpp 1 --steps 3 --tie-embeddings --load " +
                                dir + "/ck");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.output.find("--steps 3 trains nothing after --load " + dir + "/ck, saved at step 3: give --steps above 3"),
            std::string::npos)
      << none.output;
  EXPECT_EQ(none.output.find("[rank"), std::string::npos) << none.output;
  // checkpoint ls lists a damaged checkpoint, then names the shard --load would refuse.
  const auto whole = run_command(hyperpipe() + " checkpoint ls " + dir + "/ck");
  EXPECT_EQ(whole.exit_code, 0) << whole.output;
  EXPECT_NE(whole.output.find("every shard present, of its recorded size and CRC-32"), std::string::npos) << whole.output;
  run_command("cp -r " + dir + "/ck " + dir + "/cut && truncate -s -100 " + dir + "/cut/step-3/rank-1.pt");
  const auto cut = run_command(hyperpipe() + " checkpoint ls " + dir + "/cut");
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.output.find(": step 3, saved by 4 rank(s)"), std::string::npos) << cut.output;
  EXPECT_NE(cut.output.find(dir + "/cut/step-3/rank-1.pt is truncated"), std::string::npos) << cut.output;
  // A checkpoint of another model is refused before any rank starts.
  const auto r = run_command(hyperpipe() + " train --nproc 2 --schedule 1f1b --vpp 1 --layers 4 --load " + dir + "/ck");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--load"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << r.output;
}

// Issue 31: a save killed half-way leaves step-N.tmp; the next run that saves
// into the directory removes it before it writes (here it dies at step 1, so
// before any save of its own), and says so.
TEST(TrainDist, ARunThatSavesRemovesWhatAnInterruptedSaveLeftBeforeItWrites) {
  const std::string dir = fresh_dir("leftover");
  run_command("mkdir -p " + dir + "/ck/step-9.tmp " + dir + "/ck/step-4.old && touch " + dir + "/ck/step-9.tmp/rank-0.pt");
  const auto r = run_command(hyperpipe() + " train" + kModel + " --nproc 2 --schedule 1f1b --vpp 1 --steps 3 --timeout 30" +
                             " --inject-fault 0:1:exit --save " + dir + "/ck");
  EXPECT_NE(r.exit_code, 0) << r.output;  // the injected fault, before any step
  EXPECT_NE(r.output.find("removed " + dir + "/ck/step-9.tmp, left by an interrupted save"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck/step-9.tmp")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck/step-4.old")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck/latest")) << r.output;  // nothing saved
}

// Issue 15 item 5: a flipped byte in a shard is named before any rank starts.
TEST(TrainDist, AFlippedByteInAShardIsNamedOnLoadBeforeAnyRankStarts) {
  const std::string dir = fresh_dir("flip");
  train("--nproc 2 --schedule 1f1b --vpp 1 --steps 2 --save " + dir + "/ck", dir + "/a.jsonl");
  const std::string shard = dir + "/ck/step-2/rank-1.pt";
  auto flip = [&] {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto mid = f.tellg() / 2;
    f.seekg(mid);
    char c = 0;
    f.get(c);
    f.seekp(mid);
    f.put(static_cast<char>(c ^ 0x10));
  };
  flip();
  const auto r = run_command(hyperpipe() + " train" + kModel + " --nproc 2 --schedule 1f1b --vpp 1 --steps 4 --load " +
                             dir + "/ck");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--load " + dir + "/ck: " + shard + " is corrupt (its CRC-32 is "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  // Another sequence length is named too, with the file.
  flip();  // the byte as it was
  const auto s = run_command(hyperpipe() + " train" + kModel + " --seq-len 8 --nproc 2 --schedule 1f1b --vpp 1 --load " +
                             dir + "/ck/step-2");
  EXPECT_NE(s.output.find("meta.json was saved for a model with --seq-len 16; this run has --seq-len 8"), std::string::npos)
      << s.output;
}

// Issue 15 items 4 and 6: --keep-last 2 after 10 saves; a resumed run's metrics hold one line per step.
TEST(TrainDist, KeepLastPrunesAndAResumedRunsMetricsHaveOneLinePerStep) {
  const std::string dir = fresh_dir("keep");
  const auto full = train("--nproc 2 --schedule 1f1b --vpp 1 --steps 10 --save-interval 1 --keep-last 2 --save " + dir +
                              "/ck",
                          dir + "/m.jsonl");
  ASSERT_EQ(full.size(), 10u);
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/ck")) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-10", "step-9"}));
  // The run "died" after step 10 and resumes from step 9 with the same metrics file.
  const auto resumed = train("--nproc 1 --schedule no-pipelining --steps 10 --load " + dir + "/ck/step-9", dir + "/m.jsonl");
  ASSERT_EQ(resumed.size(), 10u);
  for (size_t i = 0; i < resumed.size(); ++i) EXPECT_EQ(resumed[i].first, static_cast<long>(i + 1));
  EXPECT_NEAR(resumed.back().second, full.back().second, 1e-9 * std::abs(full.back().second));
}

// Issue 15 item 3: a full disk during a save, and an unwritable --save.
TEST(TrainDist, AFailedSaveStopsTheJobInOneLineAndLeavesLatest) {
  const std::string dir = fresh_dir("nospace");
  const std::string run = hyperpipe() + " train" + kModel + " --timeout 30 --nproc 2 --schedule 1f1b --vpp 1 --steps 4 "
                          "--save-interval 2 --inject-fault 1:4:nospace --save " + dir + "/ck";
  const auto r = run_command(run, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string file = dir + "/ck/step-4.tmp/rank-1.pt.tmp";
  EXPECT_NE(r.output.find("[rank 1] hyperpipe train: error: --save " + dir + "/ck: writing shard 1 of step 4 failed: "
                          "cannot write " + file + " ("),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" bytes written): No space left on device; step-2 stays the latest checkpoint"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("frame #"), std::string::npos) << r.output;
  EXPECT_EQ(slurp(dir + "/ck/latest"), "step-2\n");
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck/step-4.tmp"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck/step-4"));
  // --save-failures continue: a warning, and the run finishes.
  const auto c = run_command(run + " --save-failures continue --steps 5 --save " + dir + "/ck2", 120);
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("hyperpipe train: warning: --save " + dir + "/ck2: writing shard 1 of step 4 failed"),
            std::string::npos)
      << c.output;
  EXPECT_EQ(slurp(dir + "/ck2/latest"), "step-5\n");
  // A --save or --metrics path under a regular file is refused before any rank starts.
  run_command("touch " + dir + "/plain");
  for (const std::string flag : {"--save", "--metrics"}) {
    const auto u = run_command(hyperpipe() + " train --nproc 2 --steps 1 " + flag + " " + dir + "/plain/x");
    EXPECT_EQ(u.exit_code, 2) << u.output;
    EXPECT_NE(u.output.find(flag + " " + dir + "/plain/x: cannot "), std::string::npos) << u.output;
    EXPECT_NE(u.output.find("Not a directory"), std::string::npos) << u.output;
    EXPECT_EQ(u.output.find("[rank"), std::string::npos) << u.output;
  }
}

}  // namespace
}  // namespace hp::testing
