// `hyperpipe train` end to end with real local ranks: pipelined and
// unpipelined loss curves agree, checkpoints move between layouts, and a
// failing rank stops the job with its name.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace hp::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A tiny double-precision model so curves can be compared to 1e-9.
const std::string kModel =
    " --layers 8 --hidden 32 --heads 2 --seq-len 16 --micro-batch-size 1 --mb 4 --dtype float64 --lr 1e-3"
    " --warmup-steps 2 --log-interval 1";

std::vector<std::pair<long, double>> train(const std::string& args, const std::string& metrics) {
  const auto r = run_command(hyperpipe() + " train" + kModel + " --timeout 30 --metrics " + metrics + " " + args, 300);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return read_losses(metrics);
}

void expect_same_curve(const std::vector<std::pair<long, double>>& a, const std::vector<std::pair<long, double>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_NEAR(a[i].second, b[i].second, 1e-9 * std::abs(b[i].second)) << "step " << a[i].first;
  }
}

// A per-rank field of the last line of a --metrics file.
std::vector<double> last_per_rank(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last).at(key).get<std::vector<double>>();
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

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

// Data, tensor and context parallelism (--dp, --tp, --cp): replicas of a
// pipeline, each reading its slice of the global batch, with stages split
// over tp ranks (and --sequence-parallel) or sequences over cp ranks,
// follow the curve of one process over dp x --mb micro-batches, with
// gradient accumulation, tied embeddings and evaluation; checkpoints saved
// under dp 2 x pp 2, tp 2 x dp 2 x pp 2 (MPipe) and cp 2 x pp 2 resume under
// pp 4, dp 4, tp 2 x pp 2 and pp 2.
TEST(TrainDist, MeshesFollowTheOneProcessCurveAndResumeUnderOtherMeshes) {
  const std::string dir = fresh_dir("dp");
  const std::string common = " --steps 5 --tie-embeddings --grad-accum 2 --eval-interval 5 --eval-iters 2";
  const auto ref = train("--nproc 1 --schedule no-pipelining --mb 8" + common, dir + "/ref.jsonl");
  ASSERT_EQ(ref.size(), 5u);
  const auto ref_val = read_losses(dir + "/ref.jsonl", "val_loss");
  ASSERT_EQ(ref_val.size(), 1u);
  const auto dp = train("--nproc 4 --dp 2 --schedule 1f1b --vpp 1 --mb 4" + common, dir + "/dp2pp2.jsonl");
  expect_same_curve(dp, ref);
  expect_same_curve(read_losses(dir + "/dp2pp2.jsonl", "val_loss"), ref_val);
  const std::vector<std::pair<long, double>> head(ref.begin(), ref.begin() + 3), tail(ref.begin() + 3, ref.end());
  const std::string save = " --steps 3 --tie-embeddings --grad-accum 2 --save " + dir + "/ck";
  expect_same_curve(train("--nproc 4 --dp 2 --schedule interleaved --vpp 2 --mb 4" + save, dir + "/first.jsonl"), head);
  const std::string resume = " --steps 5 --tie-embeddings --grad-accum 2 --load " + dir + "/ck";
  expect_same_curve(train("--nproc 4 --schedule 1f1b --vpp 1 --mb 8" + resume, dir + "/pp4.jsonl"), tail);
  expect_same_curve(train("--nproc 4 --dp 4 --schedule no-pipelining --vpp 1 --mb 2" + resume, dir + "/dp4.jsonl"), tail);
  // One checkpoint of pp 2 ranks: the replicas hold the same values, the first writes.
  const auto ls = run_command(hyperpipe() + " checkpoint ls " + dir + "/ck");
  EXPECT_NE(ls.output.find("step 3, saved by 2 rank(s)"), std::string::npos) << ls.output;
  // ZeRO-1: the AdamW state sharded over the replicas, the same curve, half the state; a
  // checkpoint it saves holds the whole state, which resumes without it and with it under dp 4.
  const auto zero = train("--nproc 4 --dp 2 --use-distributed-optimizer --schedule 1f1b --vpp 1 --mb 4" + common,
                          dir + "/zero.jsonl");
  expect_same_curve(zero, ref);
  const auto state = read_losses(dir + "/dp2pp2.jsonl", "optimizer_state_bytes"),
             zero_state = read_losses(dir + "/zero.jsonl", "optimizer_state_bytes");
  ASSERT_EQ(zero_state.size(), 5u);
  EXPECT_GT(zero_state[1].second, 0.45 * state[1].second);
  EXPECT_LT(zero_state[1].second, 0.55 * state[1].second);
  expect_same_curve(train("--nproc 4 --dp 2 --use-distributed-optimizer --schedule 1f1b --vpp 1 --mb 4" + save + "zero",
                          dir + "/zero_a.jsonl"),
                    head);
  expect_same_curve(train("--nproc 4 --schedule 1f1b --vpp 1 --mb 8" + resume + "zero", dir + "/zero_pp4.jsonl"), tail);
  expect_same_curve(train("--nproc 4 --dp 4 --use-distributed-optimizer --schedule no-pipelining --vpp 1 --mb 2" + resume + "zero",
                          dir + "/zero_dp4.jsonl"),
                    tail);
  // Tensor parallel: the same curve, and whole tensors in the checkpoint.
  expect_same_curve(train("--nproc 4 --tp 2 --schedule interleaved --vpp 2 --mb 8" + common, dir + "/tp2pp2.jsonl"), ref);
  // The gradient norm (clipping's input) counts every shard and each whole parameter once.
  const auto ref_norm = read_losses(dir + "/ref.jsonl", "grad_norm");
  ASSERT_EQ(ref_norm.size(), 5u);
  expect_same_curve(read_losses(dir + "/tp2pp2.jsonl", "grad_norm"), ref_norm);
  expect_same_curve(read_losses(dir + "/dp2pp2.jsonl", "grad_norm"), ref_norm);
  // Sequence parallelism: the activations between stages hold half the sequence.
  const std::string sp = "--nproc 4 --tp 2 --sequence-parallel --schedule 1f1b --vpp 1 --mb 8";
  expect_same_curve(train(sp + common, dir + "/sp.jsonl"), ref);
  expect_same_curve(read_losses(dir + "/sp.jsonl", "grad_norm"), ref_norm);
  // Per step: 8 activations and 8 gradients of [1, 16 / 2, 32] doubles, in each of the 2
  // pipelines (one per tp rank), twice (--grad-accum 2); and each pipeline's tied embedding
  // gradient shard [256 / 2, 32] both ways between its first and last stage.
  const auto sent = read_losses(dir + "/sp.jsonl", "bytes_sent");
  ASSERT_EQ(sent.size(), 5u);
  EXPECT_EQ(sent[1].second, 16.0 * 2 * 2 * (1 * 8 * 32 * 8) + 2 * 2 * (128 * 32 * 8));
  expect_same_curve(train("--nproc 8 --tp 2 --dp 2 --schedule mpipe --vpp 1 --transpose-layers 1 --mb 4" + save +
                              "tp",
                          dir + "/tp2dp2pp2.jsonl"),
                    head);
  expect_same_curve(train("--nproc 4 --tp 2 --schedule 1f1b --vpp 1 --mb 8" + resume + "tp", dir + "/tp_pp2.jsonl"),
                    tail);
  expect_same_curve(train("--nproc 4 --dp 4 --schedule no-pipelining --vpp 1 --mb 2" + resume + "tp", dir + "/tp_dp4.jsonl"),
                    tail);
  // Context parallel: each of a pair of ranks holds half of every sequence (with dp 2 the
  // gradients are averaged over dp x cp); a checkpoint written under cp 2 resumes under pp 2.
  expect_same_curve(train("--nproc 4 --cp 2 --dp 2 --schedule no-pipelining --vpp 1 --mb 4" + common, dir + "/cpdp.jsonl"), ref);
  expect_same_curve(read_losses(dir + "/cpdp.jsonl", "grad_norm"), ref_norm);
  expect_same_curve(train("--nproc 4 --cp 2 --schedule interleaved --vpp 2 --mb 8" + save + "cp", dir + "/cp.jsonl"), head);
  expect_same_curve(train("--nproc 2 --schedule 1f1b --vpp 1 --mb 8" + resume + "cp", dir + "/cp_pp2.jsonl"), tail);
  const auto tp_ls = run_command(hyperpipe() + " checkpoint ls " + dir + "/cktp");
  EXPECT_NE(tp_ls.output.find("step 3, saved by 2 rank(s)"), std::string::npos) << tp_ls.output;
  const auto at = tp_ls.output.find("layers.0.attention.qkv.weight");
  ASSERT_NE(at, std::string::npos) << tp_ls.output;
  EXPECT_NE(tp_ls.output.substr(at, tp_ls.output.find('\n', at) - at).find("[96, 32]"), std::string::npos) << tp_ls.output;
}

// hyperpipe verify: train's flags, one step against one process in float64;
// every parameter listed with its error, the worst first; past --tolerance
// it fails.
TEST(VerifyDist, OneStepOfALayoutAgainstOneProcessNamesEveryGradient) {
  const std::string layout = hyperpipe() +
                             " verify --nproc 4 --dp 2 --schedule interleaved --vpp 2 --mb 3 --layers 4 --hidden 32"
                             " --heads 2 --seq-len 16 --micro-batch-size 1 --tie-embeddings --timeout 30";
  const auto ok = run_command(layout, 120);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("against one process, float64"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("OK: worst relative error"), std::string::npos) << ok.output;
  for (const char* name : {"  embedding.word.weight\n", "  layers.3.mlp.fc2.weight\n", "  final_norm.bias\n"})
    EXPECT_NE(ok.output.find(name), std::string::npos) << name << ok.output;
  const auto strict = run_command(layout + " --tolerance 0", 120);
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_NE(strict.output.find("FAILED: worst relative error"), std::string::npos) << strict.output;
}

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

TEST(TrainDist, AnMhcModelTrainsPipelinedAndResumesUnderAnotherLayout) {
  const std::string dir = fresh_dir("mhc");
  const std::string mhc = " --mhc --mhc-streams 3";
  const auto full = train("--nproc 1 --schedule no-pipelining --steps 5" + mhc, dir + "/full.jsonl");
  ASSERT_EQ(full.size(), 5u);
  // Saved by an interleaved pipeline whose every edge carries 3 streams, resumed in one process.
  const auto first = train("--nproc 2 --schedule interleaved --vpp 2 --steps 3 --save " + dir + "/ck" + mhc,
                           dir + "/first.jsonl");
  expect_same_curve(first, std::vector<std::pair<long, double>>(full.begin(), full.begin() + 3));
  expect_same_curve(train("--nproc 1 --schedule no-pipelining --steps 5 --load " + dir + "/ck" + mhc,
                          dir + "/rest.jsonl"),
                    std::vector<std::pair<long, double>>(full.begin() + 3, full.end()));
  // checkpoint ls: global names, shapes and dtypes, the new ones and the old ones alike.
  const auto ls = run_command(hyperpipe() + " checkpoint ls " + dir + "/ck");
  EXPECT_EQ(ls.exit_code, 0) << ls.output;
  for (const char* row : {"layers.7.mlp.fc1.weight", "embedding.word.weight", "Double"})
    EXPECT_NE(ls.output.find(row), std::string::npos) << row << "\n" << ls.output;
  const auto at = ls.output.find("layers.0.attention_hc.mapping_proj.weight");
  ASSERT_NE(at, std::string::npos) << ls.output;
  const std::string line = ls.output.substr(at, ls.output.find('\n', at) - at);
  EXPECT_NE(line.find("[15, 96]"), std::string::npos) << line;  // n^2 + 2n = 15 rows over n * hidden = 96
  EXPECT_NE(ls.output.find("step 3, saved by 2 rank(s)"), std::string::npos) << ls.output;
  const auto missing = run_command(hyperpipe() + " checkpoint ls " + dir + "/nothing");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find(dir + "/nothing: no such directory"), std::string::npos) << missing.output;
  // Without mHC the checkpoint is of another model.
  const auto r = run_command(hyperpipe() + " train" + kModel + " --nproc 1 --schedule no-pipelining --load " + dir + "/ck");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("mhc-streams"), std::string::npos) << r.output;
}

// The spec's functional recipes (hybrid_mhc_tp2_pp2_mtp on 4 ranks as tp 2 x
// pp 2): trained through `hyperpipe train`, saved, resumed in one process on
// the same loss curve.
TEST(TrainDist, HybridMhcRecipesTrainSaveAndResumeUnderAnotherLayout) {
  const std::string dir = fresh_dir("hybrid");
  const std::string hybrid = " --model hybrid --mhc --mhc-streams 2 --moe-experts 3";
  struct Recipe {
    std::string name, pipelined;
  };
  for (const Recipe& r : {Recipe{"hybrid_mhc_pp2_mtp", "--nproc 2 --schedule 1f1b --hybrid-pattern 'M*E|-M*/*-'"},
                          Recipe{"hybrid_mhc_tp2_pp2_mtp", "--nproc 4 --tp 2 --schedule 1f1b --hybrid-pattern 'M*E|-M*/*-'"},
                          Recipe{"hybrid_mhc_pp2_vpp2_empty_mtp",
                                 "--nproc 2 --schedule interleaved --vpp 2 --pseudo-deallocate --hybrid-pattern 'M*||E-|M*/-/-'"}}) {
    SCOPED_TRACE(r.name);
    const std::string pattern = r.pipelined.substr(r.pipelined.find("--hybrid-pattern"));
    const auto full = train("--nproc 1 --schedule no-pipelining --steps 4 " + pattern + hybrid, dir + "/" + r.name + "_full.jsonl");
    ASSERT_EQ(full.size(), 4u);
    const auto first = train(r.pipelined + " --steps 2 --save " + dir + "/" + r.name + hybrid, dir + "/" + r.name + "_a.jsonl");
    expect_same_curve(first, std::vector<std::pair<long, double>>(full.begin(), full.begin() + 2));
    // The metrics carry each MTP depth's loss next to the main loss.
    const auto lines = run_command("cat " + dir + "/" + r.name + "_a.jsonl").output;
    EXPECT_NE(lines.find("\"mtp_loss_1\":5."), std::string::npos) << lines;
    expect_same_curve(train("--nproc 1 --schedule no-pipelining --steps 4 --load " + dir + "/" + r.name + " " + pattern + hybrid,
                            dir + "/" + r.name + "_b.jsonl"),
                      std::vector<std::pair<long, double>>(full.begin() + 2, full.end()));
  }
}


// A port nobody listens on now, for jobs started by hand.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), len);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Issue 11 part 4: rank 2 of 4 is killed (SIGKILL), stopped (SIGSTOP) or hangs
// in its own code at step 3. Started by hand with torchrun's variables (no
// launcher to name it), every survivor exits non-zero within --timeout + 10 s
// and its own message names rank 2 and no other rank as the culprit.
constexpr int kTimeout = 6;

// How long after rank 2's fault a survivor may take to exit: a bound on hanging, not on speed,
// counted from the fault, not from the ranks' start, which a loaded machine stretches without
// limit (one took 16.4 s from its start). It is what the failure path allows itself
// (src/cli/job.cpp, src/comm/heartbeat.cpp, with the heartbeat's 1 s interval), and --timeout
// once more as room for a loaded machine.
constexpr double kBeatS = 1;                        // HeartbeatOptions' interval, which job.cpp keeps
constexpr double kFailingWaitS = kTimeout;          // the wait that fails
constexpr double kReportS = 2 * kBeatS + 1;         // report_failure
constexpr double kDiagnoseS = 2.5 * kBeatS + 4 * 2; // diagnose: a gap, and 4 store timeouts of 2 s
constexpr double kPeersS = 5;                       // rank 0 hosting a TCP store waits for the surveys
constexpr double kHeartbeatEndS = kBeatS + 1;       // ~Heartbeat
constexpr double kFailurePathS = kFailingWaitS + kReportS + kDiagnoseS + kHeartbeatEndS;
constexpr double kRoomS = kTimeout;

// A command's output lines, each with the seconds from its start to the line's arrival: for a
// bound counted from an event the output shows rather than from the command's start.
struct TimedRun {
  int exit_code = -1;
  std::vector<std::pair<double, std::string>> lines;
  double seconds = 0;

  std::string output() const {
    std::string all;
    for (const auto& l : lines) all += l.second + "\n";
    return all;
  }
  // Seconds from the first line containing `needle` to the command's end; -1 when none does.
  double seconds_after(const std::string& needle) const {
    for (const auto& l : lines)
      if (l.second.find(needle) != std::string::npos) return seconds - l.first;
    return -1;
  }
};

TimedRun run_timed(const std::string& command, int timeout_s) {
  TimedRun r;
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  FILE* pipe = ::popen(("timeout -k 5 " + std::to_string(timeout_s) + " " + command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::string line;
  for (int c; (c = std::fgetc(pipe)) != EOF;) {
    if (c != '\n') {
      line += static_cast<char>(c);
      continue;
    }
    r.lines.emplace_back(since(), line);
    line.clear();
  }
  if (!line.empty()) r.lines.emplace_back(since(), line);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = since();
  return r;
}

std::string survivors_message_problem(const std::string& out, const std::string& fault) {
  const std::string verdict = fault == "hang" ? "rank 2 is alive but stuck" : "rank 2 is not responding";
  if (out.find(verdict) == std::string::npos) return "it does not say '" + verdict + "'";
  for (const std::string other : {"rank 0 is", "rank 1 is", "rank 3 is"})
    if (out.find(other + " not responding") != std::string::npos || out.find(other + " alive but stuck") != std::string::npos)
      return "it blames " + other.substr(0, 6);
  return "";
}

TEST(TrainDist, EverySurvivorOfAKilledStoppedOrHungRankNamesItWithoutALauncher) {
  for (const std::string fault : {"kill", "stop", "hang"}) {
    const std::string dir = fresh_dir("fault-" + fault);
    // Each survivor's exit time is noted, and the time rank 2's log shows its fault (a watcher
    // that polls it: late under load, which only shortens what is measured from it); the
    // stopped or hung rank 2 is killed at the end.
    std::ostringstream script;
    script << "cd " << dir << ";"
           << " for r in 0 1 2 3; do ( RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4"
           << " MASTER_ADDR=127.0.0.1 MASTER_PORT=" << free_port() << " OMP_NUM_THREADS=1 " << hyperpipe() << " train"
           << kModel << " --schedule 1f1b --vpp 1 --steps 50 --timeout " << kTimeout << " --inject-fault 2:3:" << fault
           << " --save " << dir << "/ck > r$r.log 2>&1; c=$?;"
           << " [ $r != 2 ] && echo EXIT $r $c $(date +%s%N) >> exits ) & done;"
           << " ( for i in $(seq 2400); do grep -qs 'injected fault' r2.log && { date +%s%N > fault_at; break; };"
           << " sleep 0.05; done ) &"
           << " while [ \"$(cat exits 2>/dev/null | wc -l)\" -lt 3 ]; do sleep 0.2; done;"
           << " pkill -9 -f -- '--save " << dir << "/ck'; wait\n";
    std::ofstream(dir + "/run.sh") << script.str();
    const auto r = run_command("bash " + dir + "/run.sh", 120);
    run_command("pkill -9 -f -- '--save " + dir + "/ck'");  // a survivor that hung (the script was stopped)
    const std::string exit_lines = slurp(dir + "/exits");
    const std::string fault_at = slurp(dir + "/fault_at");
    ASSERT_FALSE(fault_at.empty()) << fault << ": rank 2 never reported its fault\n" << slurp(dir + "/r2.log");
    for (int rank : {0, 1, 3}) {
      const std::string out = slurp(dir + "/r" + std::to_string(rank) + ".log");
      std::istringstream exits(exit_lines);
      bool seen = false;
      for (std::string word; exits >> word;) {
        if (word != "EXIT") continue;
        int who = -1, code = -1;
        double end_ns = 0;
        exits >> who >> code >> end_ns;
        if (who != rank) continue;
        seen = true;
        EXPECT_NE(code, 0) << fault << ": rank " << rank << "\n" << out;
        EXPECT_LT((end_ns - std::stod(fault_at)) / 1e9, kFailurePathS + kPeersS + kRoomS)
            << fault << ": rank " << rank << " exited too long after the fault\n" << out;
      }
      EXPECT_TRUE(seen) << fault << ": rank " << rank << " did not exit\n" << r.output << exit_lines;
      const std::string problem = survivors_message_problem(out, fault);
      EXPECT_EQ(problem, "") << fault << ": rank " << rank << "'s message:\n" << out;
    }
  }
}

// Under the launcher a dead rank is named by the launcher and the others are
// stopped; a stopped rank is noticed by its peers' timeouts, and the survivors'
// own lines (the launcher's prefix stripped) name it.
TEST(TrainDist, UnderTheLauncherAStoppedRankIsNamedByTheSurvivorsThemselves) {
  const auto r = run_timed(hyperpipe() + " train" + kModel + " --nproc 4 --schedule 1f1b --vpp 1 --steps 50 --timeout " +
                               std::to_string(kTimeout) + " --inject-fault 2:3:stop",
                           120);
  // The first survivor's failure (exit code 1) ends the job, not the command's time limit (124).
  EXPECT_EQ(r.exit_code, 1) << r.output();
  // Counted from the fault: the first survivor fails within the failure path's limits (no
  // rank 0 waiting for its peers: a local job's store is a file), then the launcher stops the
  // others, SIGKILL for the stopped rank 2 after its grace (LaunchOptions' 3 s).
  const double after_fault = r.seconds_after("[rank 2] rank 2: injected fault (stop) at step 3");
  ASSERT_GE(after_fault, 0) << r.output();
  EXPECT_LT(after_fault, kFailurePathS + 3 + kRoomS) << r.output();
  std::string survivors;  // what ranks 0, 1 and 3 printed themselves
  std::istringstream in(r.output());
  for (std::string line; std::getline(in, line);)
    for (const std::string prefix : {"[rank 0] ", "[rank 1] ", "[rank 3] "})
      if (line.rfind(prefix, 0) == 0) survivors += line.substr(prefix.size()) + "\n";
  EXPECT_NE(survivors.find("rank 2 is not responding"), std::string::npos) << r.output();
  EXPECT_EQ(survivors_message_problem(survivors, "stop"), "") << r.output();
  // The launcher reports a rank that died on its own.
  const auto killed = run_command(hyperpipe() + " train" + kModel +
                                      " --nproc 4 --schedule 1f1b --vpp 1 --steps 50 --timeout 30 --inject-fault 2:3:kill",
                                  120);
  EXPECT_NE(killed.output.find("hyperpipe launch: rank 2 failed with signal 9 (SIGKILL)"), std::string::npos)
      << killed.output;
  // Its status is the job's (the command's time limit would give 124), and the others are stopped
  // at once, not after waiting out their 30 s timeout: none says it timed out.
  EXPECT_EQ(killed.exit_code, 128 + 9) << killed.output;
  EXPECT_EQ(killed.output.find("timed out"), std::string::npos) << killed.output;
}


// The processes under `root` (itself included), from /proc's parent links.
std::vector<int> process_tree(int root) {
  std::map<int, std::vector<int>> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("PPid:", 0) == 0) children[std::stoi(line.substr(5))].push_back(std::stoi(name));
  }
  std::vector<int> tree{root};
  for (std::size_t i = 0; i < tree.size(); ++i)
    for (int c : children[tree[i]]) tree.push_back(c);
  return tree;
}

// The local addresses ("127.0.0.1", "0.0.0.0", "::", ...) of the TCP sockets
// that `pids` listen on, read from their open files and /proc/net/tcp{,6}.
std::vector<std::string> listening_addresses(const std::vector<int>& pids) {
  std::map<std::string, std::string> listening;  // socket inode -> local address
  for (const std::string table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state != "0A") continue;  // TCP_LISTEN
      const std::string hex = local.substr(0, local.find(':'));
      char text[INET6_ADDRSTRLEN] = {0};
      if (hex.size() == 8) {
        in_addr a{};
        a.s_addr = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
        inet_ntop(AF_INET, &a, text, sizeof text);
      } else {
        in6_addr a{};
        for (int w = 0; w < 4; ++w) {
          const std::uint32_t word = static_cast<std::uint32_t>(std::stoul(hex.substr(8 * w, 8), nullptr, 16));
          std::memcpy(&a.s6_addr[4 * w], &word, 4);
        }
        inet_ntop(AF_INET6, &a, text, sizeof text);
      }
      listening["socket:[" + inode + "]"] = text;
    }
  }
  std::vector<std::string> out;
  for (int pid : pids) {
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      const auto target = std::filesystem::read_symlink(fd.path(), ec);
      if (!ec && listening.count(target.string())) out.push_back(listening[target.string()]);
    }
  }
  return out;
}

// Issue 15 item 1: a local job's store is a file in a private directory, and
// Gloo listens on loopback; so nothing of the job listens on another interface.
TEST(TrainDist, ALocalJobListensOnNoInterfaceButLoopback) {
  const std::string dir = fresh_dir("listen");
  const auto started = run_command(hyperpipe() + " train" + kModel + " --nproc 2 --steps 30 --timeout 30 > " + dir +
                                   "/log 2>&1 & echo $!");
  const int launcher = std::stoi(started.output);
  std::set<std::string> seen;
  int samples_with_ranks = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (::kill(launcher, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    const auto tree = process_tree(launcher);
    if (tree.size() >= 3) ++samples_with_ranks;
    for (const auto& a : listening_addresses(tree)) seen.insert(a);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string log = slurp(dir + "/log");
  ASSERT_NE(log.find("step 30/30"), std::string::npos) << log;
  EXPECT_GT(samples_with_ranks, 10) << log;
  for (const auto& a : seen)
    EXPECT_TRUE(a.rfind("127.", 0) == 0 || a == "::1" || a.rfind("::ffff:127.", 0) == 0)
        << "a rank listened on " << a << "\n" << log;
}

// Issue 11 part 5: on a terminal (util-linux `script` gives the command one)
// the progress is one bar redrawn in place, with an ETA, also when the ranks
// write to the launcher's pipes; in a pipe or file it is plain lines.
TEST(TrainDist, OnATerminalTheProgressIsABarRedrawnInPlaceAlsoUnderTheLauncher) {
  const std::string train = hyperpipe() + " train" + kModel + " --steps 6 --timeout 30";
  auto on_terminal = [](const std::string& command) {
    return run_command("script -qec \"" + command + "\" /dev/null", 120);
  };
  const auto one = on_terminal("RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=0 " + train);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("\r[#####     "), std::string::npos) << one.output;  // step 1 of 6
  EXPECT_NE(one.output.find("] step 3/6  loss "), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("  ETA "), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("\r[" + std::string(30, '#') + "] step 6/6  loss "), std::string::npos) << one.output;

  const auto two = on_terminal(train + " --nproc 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  // The launcher clears the line and draws rank 0's bar in place; the last
  // step stays as a line of its own and the bar goes.
  EXPECT_NE(two.output.find("\r\x1b[K[rank 0] [##########     "), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("\r\x1b[K[rank 0] step 6/6  loss "), std::string::npos) << two.output;
  EXPECT_EQ(two.output.find("[rank 0] \r"), std::string::npos) << two.output;
  EXPECT_EQ(two.output.find("[rank 0] \n"), std::string::npos) << two.output;

  const auto piped = run_command(train + " --nproc 2 | cat", 120);
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos) << piped.output;
  EXPECT_NE(piped.output.find("[rank 0] step 1/6  loss "), std::string::npos) << piped.output;
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
