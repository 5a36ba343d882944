// `hyperpipe train` end to end over meshes of real local ranks: data, tensor
// and context parallelism (and ZeRO-1's sharded optimizer state) follow the
// one-process loss curve, and their checkpoints resume under other meshes.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "train_run.hpp"

namespace hp::testing {
namespace {

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
  // The same under a split backward: ZB-H1's deferred weight gradients reach the sharded optimizer whole.
  expect_same_curve(train("--nproc 4 --dp 2 --use-distributed-optimizer --schedule zb1p --vpp 1 --mb 4" + common,
                          dir + "/zero_zb1p.jsonl"),
                    ref);
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

}  // namespace
}  // namespace hp::testing
