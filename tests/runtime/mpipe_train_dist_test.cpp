// `hyperpipe train --schedule mpipe` end to end, through the trainer (AdamW,
// LR schedule, gradient clipping, metrics): in double precision the MPipe loss
// and gradient-norm curves equal those of the same model under interleaved
// 1F1B, for GPT and the VL model; the metrics carry the broadcast and P2P byte
// counts; bad MPipe input fails with one line before any rank trains.
// Needs the hyperpipe binary next to the workers (HP_BIN_DIR).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "launch/launcher.hpp"

namespace {

const std::string kBin = std::string(HP_BIN_DIR) + "/hyperpipe";

struct Run {
  int code = -1;
  std::string out;         // every line
  int command_lines = 0;
  std::vector<nlohmann::json> metrics;
};

// Runs `hyperpipe train ARGS` as a user would: as the launcher, which starts
// the ranks itself (so not through launch::launch_local, whose RANK/WORLD_SIZE
// would make it one rank of a one-rank job). Bounded by timeout(1).
Run train(std::vector<std::string> args, const std::string& tag) {
  Run r;
  if (::access(kBin.c_str(), X_OK) != 0) {
    r.out = kBin + " is missing: build the hyperpipe target before the dist tests";
    return r;
  }
  const std::string metrics = ::testing::TempDir() + "/mpipe_train_" + tag + "_" + std::to_string(::getpid()) + ".jsonl";
  std::remove(metrics.c_str());
  std::string cmd = "OMP_NUM_THREADS=1 timeout -k 5 120 " + kBin + " train --timeout 30 --metrics " + metrics;
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) {
    r.out = "cannot run " + cmd;
    return r;
  }
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) {
    r.out += buf;
    ++r.command_lines;
  }
  const int status = ::pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) r.metrics.push_back(nlohmann::json::parse(line));
  std::remove(metrics.c_str());
  return r;
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A tiny double-precision model: clipping is active (--clip-grad 0.05), so a
// gradient norm that counted the preprocess replicas would bend the curve.
const std::vector<std::string> kGPT = {"--nproc", "2", "--vpp", "1", "--mb", "4", "--layers", "4", "--hidden", "16",
                                       "--heads", "2", "--seq-len", "8", "--dtype", "float64", "--clip-grad", "0.05",
                                       "--steps", "5", "--warmup-steps", "1", "--log-interval", "100"};

void expect_same_curve(const Run& mpipe, const Run& base, int steps) {
  ASSERT_EQ(mpipe.code, 0) << mpipe.out;
  ASSERT_EQ(base.code, 0) << base.out;
  ASSERT_EQ(static_cast<int>(mpipe.metrics.size()), steps) << mpipe.out;
  ASSERT_EQ(static_cast<int>(base.metrics.size()), steps) << base.out;
  for (int s = 0; s < steps; ++s) {
    for (const char* key : {"loss", "grad_norm"}) {
      const double a = mpipe.metrics[s][key], b = base.metrics[s][key];
      EXPECT_LT(std::abs(a - b) / (1 + std::abs(b)), 1e-10) << key << " at step " << s + 1 << ": " << a << " vs " << b;
    }
    EXPECT_GT(mpipe.metrics[s]["bytes_sent"].get<double>(), 0);
    EXPECT_EQ(mpipe.metrics[s]["bytes_sent"].get<double>(), mpipe.metrics[s]["bytes_received"].get<double>());
    EXPECT_EQ(base.metrics[s]["bytes_broadcast"].get<double>(), 0);
  }
  EXPECT_LT(mpipe.metrics.back()["loss"].get<double>(), mpipe.metrics.front()["loss"].get<double>());
}

TEST(MPipeTrain, GPTFollowsTheInterleavedLossCurveAndBroadcastsEveryStep) {
  const auto mpipe = train(concat(kGPT, {"--schedule", "mpipe", "--transpose-layers", "1", "--overflow", "min",
                                         "--tie-embeddings"}), "gpt_mpipe");
  const auto base = train(concat(kGPT, {"--schedule", "interleaved", "--tie-embeddings"}), "gpt_base");
  expect_same_curve(mpipe, base, 5);
  // Embeddings (32 + 8 positions) and one layer of width 16, in double, to one receiver.
  const double params = (256 + 8) * 16 + (16 * 48 + 48) + (16 * 16 + 16) + (16 * 64 + 64) + (64 * 16 + 16) + 4 * 16;
  for (const auto& m : mpipe.metrics) EXPECT_EQ(m["bytes_broadcast"].get<double>(), params * 8) << mpipe.out;
}

TEST(MPipeTrain, OwnerBackwardWithGradientAccumulationFollowsTheCurve) {
  const std::vector<std::string> accum = {"--grad-accum", "2", "--nproc", "3", "--mb", "2"};
  const auto mpipe = train(concat(concat(kGPT, accum), {"--schedule", "mpipe", "--transpose-layers", "1",
                                                        "--owner-backward", "--layers", "6"}), "owner_mpipe");
  const auto base = train(concat(concat(kGPT, accum), {"--schedule", "interleaved", "--layers", "6"}), "owner_base");
  expect_same_curve(mpipe, base, 5);
}

TEST(MPipeTrain, FrozenVisionTowerFollowsTheCurveAndIsBroadcastOnce) {
  const std::vector<std::string> vl = {"--model", "vl", "--freeze-vision", "--vision-layers", "2", "--image-size", "8",
                                       "--vision-hidden", "8", "--vocab", "17"};
  const auto mpipe = train(concat(concat(kGPT, vl), {"--schedule", "mpipe", "--transpose-layers", "2"}), "vl_mpipe");
  const auto base = train(concat(concat(kGPT, vl), {"--schedule", "1f1b"}), "vl_base");
  expect_same_curve(mpipe, base, 5);
  ASSERT_EQ(mpipe.metrics.size(), 5u);
  EXPECT_GT(mpipe.metrics[0]["bytes_broadcast"].get<double>(), 0);
  for (size_t s = 1; s < mpipe.metrics.size(); ++s) EXPECT_EQ(mpipe.metrics[s]["bytes_broadcast"].get<double>(), 0);
}

// --overflow auto at PP 2, MB 7 with a frozen 3-block tower: the owners it
// picks (0 1 0i 1 0 1 0 on unit layer costs: neither full nor min) train the
// same curve.
TEST(MPipeTrain, AutoOverflowOwnersFollowTheCurve) {
  const std::vector<std::string> vl = {"--model", "vl", "--freeze-vision", "--vision-layers", "3", "--image-size", "8",
                                       "--vision-hidden", "8", "--vocab", "17", "--mb", "7", "--steps", "3"};
  const auto mpipe = train(concat(concat(kGPT, vl), {"--schedule", "mpipe", "--transpose-layers", "3", "--overflow", "auto"}),
                           "vl_auto");
  const auto base = train(concat(concat(kGPT, vl), {"--schedule", "1f1b"}), "vl_auto_base");
  expect_same_curve(mpipe, base, 3);
  EXPECT_NE(mpipe.out.find("overflow=auto (owners 0 1 0i 1 0 1 0)"), std::string::npos) << mpipe.out;
}

// Issue 13 part 6: MPipe around a 1F1B body (MB 3 over PP 2, min overflow);
// --vpp is left to its default, which for this body is 1.
TEST(MPipeTrain, OverA1F1BBodyFollowsTheCurve) {
  std::vector<std::string> gpt = kGPT;
  gpt.erase(gpt.begin() + 2, gpt.begin() + 4);  // --vpp 1
  const std::vector<std::string> mb = {"--mb", "3", "--steps", "3"};
  const auto mpipe = train(concat(concat(gpt, mb), {"--schedule", "mpipe", "--mpipe-body", "1f1b", "--transpose-layers",
                                                    "1", "--overflow", "min"}), "body_1f1b");
  const auto base = train(concat(concat(gpt, mb), {"--schedule", "1f1b"}), "body_1f1b_base");
  expect_same_curve(mpipe, base, 3);
  EXPECT_NE(mpipe.out.find("hyperpipe train: mpipe pp=2 vpp=1 mb=3 body=1f1b"), std::string::npos) << mpipe.out;
}

TEST(MPipeTrain, TransposingOnlyTheDataLoadFollowsTheCurveAndBroadcastsNothing) {
  const std::vector<std::string> steps = {"--steps", "3"};
  const auto r = train(concat(concat(kGPT, steps), {"--schedule", "mpipe", "--transpose-layers", "0"}), "t0");
  const auto base = train(concat(concat(kGPT, steps), {"--schedule", "interleaved"}), "t0_base");
  expect_same_curve(r, base, 3);
  for (const auto& m : r.metrics) EXPECT_EQ(m["bytes_broadcast"].get<double>(), 0);
}

// Rank 0 checkpoints the preprocess under its global names; a resumed run
// loads it there and the broadcast hands it to the replicas.
TEST(MPipeTrain, AResumedRunFollowsTheUninterruptedOne) {
  const std::string dir = ::testing::TempDir() + "/mpipe_ckpt_" + std::to_string(::getpid());
  const std::vector<std::string> mp = {"--schedule", "mpipe", "--transpose-layers", "1", "--owner-backward",
                                       "--steps", "4"};
  const auto full = train(concat(concat(kGPT, mp), {"--save", dir, "--save-interval", "2"}), "ckpt_full");
  ASSERT_EQ(full.code, 0) << full.out;
  const auto resumed = train(concat(concat(kGPT, mp), {"--load", dir + "/step-2"}), "ckpt_resumed");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  ASSERT_EQ(full.metrics.size(), 4u);
  ASSERT_EQ(resumed.metrics.size(), 2u) << resumed.out;
  for (int s = 0; s < 2; ++s) {
    const double a = resumed.metrics[s]["loss"], b = full.metrics[s + 2]["loss"];
    EXPECT_EQ(resumed.metrics[s]["step"].get<int>(), s + 3);
    EXPECT_LT(std::abs(a - b) / (1 + std::abs(b)), 1e-10) << "step " << s + 3 << ": " << a << " vs " << b;
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

// One line, exit 2, before any rank starts.
void expect_rejected(std::vector<std::string> args, const std::string& needle) {
  const auto r = train(concat(kGPT, args), "bad");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("hyperpipe train: error: " + needle), std::string::npos) << r.out;
  EXPECT_EQ(r.command_lines, 1) << r.out;
}

TEST(MPipeTrain, BadInputFailsWithOneLineBeforeAnyRankStarts) {
  expect_rejected({"--schedule", "mpipe", "--transpose-layers", "2"},
                  "--transpose-layers must be < 2, the layers of stage 0's first chunk");
  expect_rejected({"--schedule", "mpipe", "--transpose-layers", "0", "--owner-backward"},
                  "--owner-backward needs --transpose-layers >= 1");
  expect_rejected({"--schedule", "mpipe", "--nproc", "1"}, "MPipe Transpose needs --nproc >= 2");
  expect_rejected({"--schedule", "mpipe", "--model", "vl", "--transpose-layers", "3", "--vocab", "17"},
                  "--transpose-layers counts vision tower blocks for a VL model: 0 <= T <= --vision-layers 2");
  expect_rejected({"--schedule", "mpipe", "--model", "vl", "--freeze-vision", "--owner-backward", "--vocab", "17"},
                  "--owner-backward needs a trainable preprocess");
  expect_rejected({"--schedule", "mpipe", "--mpipe-body", "gpipe", "--vpp", "2", "--layers", "8"},
                  "--mpipe-body gpipe runs one chunk per rank: use --vpp 1, or --mpipe-body interleaved for --vpp > 1 (got --vpp 2)");
  expect_rejected({"--schedule", "mpipe", "--mpipe-body", "zigzag"}, "--mpipe-body: must be one of gpipe, 1f1b, interleaved, zb1p, zbv, dualpipev, got 'zigzag'");
}

// torchrun-style ranks that were given different flags: rank 1 builds a
// preprocess of two layers where rank 0 has one.
TEST(MPipeTrain, APreprocessThatDiffersBetweenRanksIsNamedBeforeTraining) {
  hp::launch::LaunchOptions lo;
  lo.nproc = 2;
  std::string cmd = "exec " + kBin + " train --timeout 30 --schedule mpipe --layers 8 --vpp 1 --mb 2 --hidden 16 "
                    "--heads 2 --seq-len 8 --steps 2 --transpose-layers $((1 + RANK))";
  lo.command = {"sh", "-c", cmd};
  lo.extra_env = {{"OMP_NUM_THREADS", "1"}};
  lo.job_timeout = std::chrono::seconds(60);
  std::string out;
  std::mutex mu;
  lo.on_output = [&](const hp::launch::LaunchOutput& o) {
    std::lock_guard<std::mutex> lock(mu);
    out += o.formatted() + "\n";
  };
  ASSERT_EQ(::access(kBin.c_str(), X_OK), 0) << kBin << " is missing";
  EXPECT_NE(hp::launch::launch_local(lo), 0) << out;
  EXPECT_NE(out.find("error: the MPipe preprocess module differs between ranks: rank 1 ("), std::string::npos) << out;
  EXPECT_EQ(out.find("step 1/"), std::string::npos) << out;
}

}  // namespace
