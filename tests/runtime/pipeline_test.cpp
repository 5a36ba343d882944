// Single-process pipelines (one rank, several stages): the executor, stages,
// local stage hand-off and tied-copy handling against the reference step.
#include <gtest/gtest.h>

#include "model/gpt_stages.hpp"
#include "runtime/microbatch.hpp"
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
  EXPECT_THROW(model::build_gpt_stages(g, s, 0), std::invalid_argument);
  s.vpp = 1;
  g.config.num_attention_heads = 3;
  EXPECT_THROW(model::build_gpt_stages(g, s, 0), std::invalid_argument);
}

}  // namespace
}  // namespace hp::runtime
