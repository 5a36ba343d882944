// `hyperpipe train` end to end with real local ranks: every pipelined layout
// (1F1B, interleaved, GPipe, MPipe) follows the loss curve of one unpipelined
// process, with variable sequence lengths, held-out evaluation and tied
// embeddings with gradient accumulation, and each rank reads only the data
// it consumes.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "train_run.hpp"

namespace hp::testing {
namespace {

TEST(TrainDist, PipelinedAndUnpipelinedAdamWCurvesAgree) {
  const std::string dir = fresh_dir("curve");
  const auto ref = train("--nproc 1 --schedule no-pipelining --vpp 1 --steps 4", dir + "/ref.jsonl");
  ASSERT_EQ(ref.size(), 4u);
  EXPECT_LT(ref.back().second, ref.front().second);
  expect_same_curve(train("--nproc 4 --schedule 1f1b --vpp 1 --steps 4", dir + "/1f1b.jsonl"), ref);
  expect_same_curve(train("--nproc 2 --schedule interleaved --vpp 2 --steps 4", dir + "/il.jsonl"), ref);
  expect_same_curve(train("--nproc 2 --schedule gpipe --vpp 1 --steps 4", dir + "/gpipe.jsonl"), ref);
  // Every rank's peak tensor bytes, parameters and optimizer state included.
  for (const auto& [file, ranks] : {std::pair{"/ref.jsonl", 1}, {"/1f1b.jsonl", 4}, {"/gpipe.jsonl", 2}}) {
    std::ifstream in(dir + file);
    for (std::string line; std::getline(in, line);) {
      const auto peaks = nlohmann::json::parse(line).at("peak_bytes");
      ASSERT_EQ(peaks.size(), static_cast<size_t>(ranks)) << file << ": " << line;
      for (const auto& p : peaks) EXPECT_GT(p.get<double>(), 10000) << file << ": " << line;
    }
  }
  // Each rank reads only the data it consumes (4 micro-batches of 16 tokens,
  // 8 bytes each): stage 0's rank the inputs, the last stage's the labels, the
  // middle ranks nothing.
  EXPECT_EQ(last_per_rank(dir + "/ref.jsonl", "bytes_loaded"), (std::vector<double>{1024}));
  EXPECT_EQ(last_per_rank(dir + "/1f1b.jsonl", "bytes_loaded"), (std::vector<double>{512, 0, 0, 512}));
  EXPECT_EQ(last_per_rank(dir + "/il.jsonl", "bytes_loaded"), (std::vector<double>{512, 512}));
}

// --variable-seq-len: micro-batches of different lengths (shapes shipped with
// every message) follow the one-process curve under 1F1B, interleaved and
// MPipe with T 0 and 1.
TEST(TrainDist, VariableSequenceLengthsFollowTheOneProcessCurve) {
  const std::string dir = fresh_dir("varlen");
  const std::string common = " --steps 3 --variable-seq-len";
  const auto ref = train("--nproc 1 --schedule no-pipelining" + common, dir + "/ref.jsonl");
  ASSERT_EQ(ref.size(), 3u);
  int i = 0;
  for (const std::string layout : {"--nproc 4 --schedule 1f1b", "--nproc 2 --schedule interleaved --vpp 2",
                                   "--nproc 4 --schedule mpipe --vpp 1 --transpose-layers 0",
                                   "--nproc 2 --schedule mpipe --vpp 2 --transpose-layers 1"})
    expect_same_curve(train(layout + common, dir + "/" + std::to_string(i++) + ".jsonl"), ref);
}

// The held-out loss through the forward-only schedule: every layout (1F1B,
// interleaved, MPipe with a transposed layer) reports the unpipelined value at
// the evaluated steps, and training is what it is without evaluation.
TEST(TrainDist, HeldOutLossIsTheSameUnderEveryLayout) {
  const std::string dir = fresh_dir("eval");
  const std::string eval = " --steps 4 --eval-interval 3 --eval-iters 2";
  const auto ref = train("--nproc 1 --schedule no-pipelining --vpp 1" + eval, dir + "/ref.jsonl");
  const auto ref_val = read_losses(dir + "/ref.jsonl", "val_loss");
  ASSERT_EQ(ref_val.size(), 2u);  // step 3 and the last
  EXPECT_EQ(ref_val[0].first, 3);
  EXPECT_EQ(ref_val[1].first, 4);
  EXPECT_LT(ref_val[1].second, ref_val[0].second);
  expect_same_curve(train("--nproc 1 --schedule no-pipelining --vpp 1 --steps 4", dir + "/plain.jsonl"), ref);
  for (const std::string layout : {"--nproc 4 --schedule 1f1b --vpp 1", "--nproc 2 --schedule interleaved --vpp 2",
                                   "--nproc 4 --schedule mpipe --vpp 1 --transpose-layers 1"}) {
    const std::string metrics = dir + "/" + std::to_string(std::hash<std::string>()(layout)) + ".jsonl";
    expect_same_curve(train(layout + eval, metrics), ref);
    expect_same_curve(read_losses(metrics, "val_loss"), ref_val);
    // MPipe: each owner reads the inputs of its own micro-batch (one each), the last rank the labels too.
    if (layout.find("mpipe") != std::string::npos) {
      EXPECT_EQ(last_per_rank(metrics, "bytes_loaded"), (std::vector<double>{128, 128, 128, 640}));
    }
  }
}

// Tied copies on one rank (interleaved v 2 on a single rank) and on two ranks
// (a VL model's text body), with gradient accumulation: the same curve as the
// unsplit model, so the tied sum and the accumulation's scaling compose.
TEST(TrainDist, TiedEmbeddingsWithAccumulationFollowTheUnsplitCurve) {
  const std::string dir = fresh_dir("tied");
  const std::string common = " --steps 3 --tie-embeddings --grad-accum 2";
  const auto ref = train("--nproc 1 --schedule no-pipelining" + common, dir + "/ref.jsonl");
  expect_same_curve(train("--nproc 1 --schedule interleaved --vpp 2 --mb 4" + common, dir + "/one.jsonl"), ref);
  const std::string vl = " --model vl --vision-layers 1 --vocab 17 --image-size 8 --layers 2" + common;
  const auto vl_ref = train("--nproc 1 --schedule no-pipelining" + vl, dir + "/vl_ref.jsonl");
  expect_same_curve(train("--nproc 2 --schedule 1f1b" + vl, dir + "/vl_pp2.jsonl"), vl_ref);
  // Every image, caption and label is made once, by the rank that uses it:
  // under MPipe each image by its micro-batch's owner.
  expect_same_curve(train("--nproc 2 --schedule mpipe --vpp 1 --transpose-layers 1" + vl, dir + "/vl_mpipe.jsonl"), vl_ref);
  const auto one = last_per_rank(dir + "/vl_ref.jsonl", "bytes_loaded"), pp2 = last_per_rank(dir + "/vl_pp2.jsonl", "bytes_loaded"),
             mpipe = last_per_rank(dir + "/vl_mpipe.jsonl", "bytes_loaded");
  EXPECT_EQ(sum(pp2), sum(one));
  EXPECT_EQ(sum(mpipe), sum(one));
  EXPECT_GT(mpipe[1], pp2[1]);  // rank 1 makes the images of the micro-batches it owns
}

}  // namespace
}  // namespace hp::testing
