// Single-process pipelines (one rank, several stages): the executor, stages,
// local stage hand-off and tied-copy handling against the reference step.
#include <gtest/gtest.h>

#include <torch/csrc/autograd/autograd.h>
#include <torch/nn/modules/linear.h>

#include "model/gpt_stages.hpp"
#include "runtime/microbatch.hpp"
#include "runtime/module_stage.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/reference.hpp"

namespace hp::runtime {
namespace {

model::TransformerConfig tiny_config(bool tie) { return testing::tiny_gpt_config(tie, 7); }

struct Case {
  schedule::ScheduleKind kind;
  int vpp;
  int mb;
  bool tie;
};

class OneRankPipeline : public ::testing::TestWithParam<Case> {};

TEST_P(OneRankPipeline, LossAndGradientsEqualTheReference) {
  const Case c = GetParam();
  PipelineOptions o;
  o.schedule.kind = c.kind;
  o.schedule.pp = 1;
  o.schedule.vpp = c.vpp;
  o.schedule.micro_batches = c.mb;
  model::GPTStagesOptions g;
  g.config = tiny_config(c.tie);
  Pipeline p(o, 0, nullptr, model::build_gpt_stages(g, o.schedule, 0));
  auto micros = testing::make_micro_tokens(c.mb, 2, {6}, g.config.vocab_size, 11);
  const StepResult r = p.step(model::lm_micro_batches(micros));
  p.reduce_tied_grads();
  const auto ref = testing::reference_step(g.config, micros);
  EXPECT_NEAR(r.loss, ref.loss, 1e-12);
  const auto params = p.named_parameters();
  ASSERT_EQ(params.size(), ref.grads.size());
  for (const auto& [name, g] : ref.grads) {
    ASSERT_TRUE(params.count(name)) << name;
    ASSERT_TRUE(params.at(name).grad().defined()) << name;
    EXPECT_LT(testing::max_rel_error(params.at(name).grad(), g), 1e-10) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, OneRankPipeline,
                         ::testing::Values(Case{schedule::ScheduleKind::NoPipelining, 1, 1, false},
                                           Case{schedule::ScheduleKind::NoPipelining, 1, 3, true},
                                           Case{schedule::ScheduleKind::Interleaved, 2, 3, false},
                                           Case{schedule::ScheduleKind::Interleaved, 2, 4, true},
                                           Case{schedule::ScheduleKind::Interleaved, 4, 5, true}));

TEST(Microbatch, SplitsAlongBatchAndMergesBack) {
  at::Tensor b = at::arange(7 * 3).view({7, 3});
  auto parts = split_microbatches(b, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].size(0), 3);
  EXPECT_EQ(parts[2].size(0), 2);
  EXPECT_TRUE(merge_microbatches(parts).equal(b));
  EXPECT_THROW(split_microbatches(b, 8), std::invalid_argument);
  EXPECT_THROW(split_microbatches(b, 0), std::invalid_argument);
}

TEST(Pipeline, RejectsBadLayoutsBeforeRunning) {
  schedule::ScheduleOptions s;
  s.kind = schedule::ScheduleKind::Interleaved;
  s.pp = 1;
  s.vpp = 8;  // 8 stages for 4 layers
  model::GPTStagesOptions g;
  g.config = tiny_config(false);
  auto refusal = [&] {
    try {
      model::build_gpt_stages(g, s, 0);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("built");
  };
  EXPECT_EQ(refusal(), "model.num_layers 4 cannot be split over 8 stages (schedule.pp 1 x schedule.vpp 8): give at "
                       "least 8 layers or per-stage counts (model.layers_per_stage)");
  s.vpp = 1;
  g.config.num_attention_heads = 3;
  EXPECT_EQ(refusal(), "model.num_attention_heads 3 must divide model.hidden_size 16 (each head gets hidden / heads "
                       "channels)");
}

}  // namespace
}  // namespace hp::runtime

namespace hp::runtime {
namespace {

// A user's own modules through the public API: two Linear stages on one rank
// (interleaved, v = 2), the first and last sharing a tied weight by name.
struct UserModel {
  torch::nn::Linear first{torch::nn::LinearOptions(4, 4).bias(false)};
  torch::nn::Linear last{torch::nn::LinearOptions(4, 4).bias(false)};
  UserModel() {
    first->to(at::kDouble);
    last->to(at::kDouble);
    at::NoGradGuard g;
    first->weight.copy_(at::linspace(-1, 1, 16, at::kDouble).view({4, 4}));
    last->weight.copy_(first->weight);
  }
  RankModel rank_model(bool tie) {
    RankModel m;
    m.stages.push_back(module_stage(0, first, tie ? "" : "a."));
    m.stages.push_back(module_stage(1, last, tie ? "" : "b."));
    m.loss = [](const at::Tensor& out, const at::Tensor& t) { return (out - t).pow(2).mean(); };
    if (tie) m.tied_parameters = {"weight"};
    return m;
  }
};

PipelineOptions two_chunks(int mb) {
  PipelineOptions o;
  o.schedule.kind = schedule::ScheduleKind::Interleaved;
  o.schedule.pp = 1;
  o.schedule.vpp = 2;
  o.schedule.micro_batches = mb;
  return o;
}

std::vector<MicroBatch> user_micros(int mb) {
  std::vector<MicroBatch> out(mb);
  for (int m = 0; m < mb; ++m) {
    out[m].input = at::full({2, 4}, 0.1 * (m + 1), at::kDouble);
    out[m].target = at::full({2, 4}, 0.5, at::kDouble);
  }
  return out;
}

TEST(UserPipeline, ModulesByGlobalIndexWithATiedWeightEqualPlainAutograd) {
  UserModel u;
  Pipeline p(two_chunks(3), 0, nullptr, u.rank_model(/*tie=*/true));
  const auto micros = user_micros(3);
  const StepResult r = p.step(micros);
  p.reduce_tied_grads();
  // By hand: one weight used twice; the loss is the mean over all targets.
  const at::Tensor w = at::linspace(-1, 1, 16, at::kDouble).view({4, 4}).requires_grad_(true);
  at::Tensor want = at::zeros({}, at::kDouble);
  for (const auto& m : micros) want = want + (at::linear(at::linear(m.input, w), w) - m.target).pow(2).mean() / 3;
  torch::autograd::backward({want});
  EXPECT_NEAR(r.loss, want.item<double>(), 1e-14);
  EXPECT_EQ(r.tokens, 3 * 8);
  const auto params = p.named_parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_TRUE(params.at("weight").grad().allclose(w.grad(), 1e-12, 1e-14));
  // The copies share storage, so one optimizer update moves both.
  EXPECT_EQ(u.first->weight.data_ptr(), u.last->weight.data_ptr());
  EXPECT_TRUE(u.last->weight.grad().equal(u.first->weight.grad()));
  EXPECT_TRUE(p.duplicate_parameter_names().empty());
}

TEST(UserPipeline, WhatARankHandsInIsCheckedBeforeRunning) {
  auto expect = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "accepted; expected: " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  UserModel u;
  RankModel m = u.rank_model(true);
  m.tied_parameters.clear();
  expect([&] { Pipeline(two_chunks(2), 0, nullptr, m); }, "parameter weight is held twice on rank 0");
  m = u.rank_model(false);
  m.stages.pop_back();
  expect([&] { Pipeline(two_chunks(2), 0, nullptr, m); }, "runs stages {0, 1} but was given {0}");
  m = u.rank_model(false);
  m.loss = nullptr;
  expect([&] { Pipeline(two_chunks(2), 0, nullptr, m); }, "holds the last stage but the model has no loss");
  m = u.rank_model(false);
  Pipeline p(two_chunks(2), 0, nullptr, m);
  auto micros = user_micros(2);
  expect([&] { p.step(user_micros(3)); }, "the step got 3 micro-batches");
  micros[1].target = at::Tensor();
  expect([&] { p.step(micros); }, "micro-batch 1 has no target");
  EXPECT_EQ(p.input_micros(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(p.reads_targets());
}

}  // namespace
}  // namespace hp::runtime
