// Where a step's time goes (bench/step_breakdown.hpp), from one process.
#include <gtest/gtest.h>

#include "bench/bench_fixture.hpp"
#include "bench/step_breakdown.hpp"

namespace {

using namespace hp;

struct OneStagePipeline {
  std::unique_ptr<train::GptTask> task = bench::testing::small_gpt(2);
  runtime::PipelineOptions options = [] {
    runtime::PipelineOptions o;
    o.schedule.kind = schedule::ScheduleKind::NoPipelining;
    o.schedule.pp = 1;
    o.schedule.micro_batches = 2;
    return o;
  }();
  runtime::Pipeline pipeline{options, 0, nullptr, task->build(options.schedule, 0, {})};
  std::vector<runtime::MicroBatch> micros = bench::testing::whole_batch(*task, 2);
};

TEST(StepBreakdown, TheStepIsItsComputeWaitsPostsAndRestAndLeavesNoGradient) {
  OneStagePipeline p;
  const bench::StepBreakdown b = bench::break_down_step(p.pipeline, p.micros, nullptr);
  EXPECT_GT(b.compute, 0);
  EXPECT_GT(b.optimizer, 0);
  EXPECT_EQ(b.post, 0);  // one process sends nothing
  EXPECT_DOUBLE_EQ(b.compute + b.wait + b.post + b.rest, b.step);
  for (const auto& [name, w] : p.pipeline.named_parameters())
    EXPECT_TRUE(!w.grad().defined() || w.grad().abs().sum().item<double>() == 0) << name;
}

TEST(StepBreakdown, ABodyWithoutMPipeHasNoMPipeWork) {
  OneStagePipeline p;
  const bench::MPipeWork w = bench::mpipe_work(p.pipeline, p.micros);
  EXPECT_EQ(w.broadcast, 0);
  EXPECT_EQ(w.preprocess_backward, 0);
}

TEST(StepBreakdown, TheProfiledOperatorsComeInFallingSelfTime) {
  OneStagePipeline p;
  const auto ops = bench::profile_step_ops(p.pipeline, p.micros);
  ASSERT_FALSE(ops.empty());
  for (std::size_t i = 1; i < ops.size(); ++i) EXPECT_LE(ops[i].self_us, ops[i - 1].self_us) << ops[i].name;
  const bool has_mm = std::any_of(ops.begin(), ops.end(), [](const auto& op) { return op.name.find("mm") != std::string::npos; });
  EXPECT_TRUE(has_mm);
}

}  // namespace
