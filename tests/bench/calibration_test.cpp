// The bench engine's calibration (bench/calibration.hpp): what each stage's
// rank measures, and the cost model the simulator gets from it.
#include <gtest/gtest.h>

#include "bench/bench_fixture.hpp"
#include "bench/calibration.hpp"

namespace {

using namespace hp;

TEST(Calibration, ARankMeasuresItsOwnStagesOnlyAndCountsTheirGradientBytes) {
  const auto task = bench::testing::small_gpt();
  schedule::ScheduleOptions layout;
  layout.kind = schedule::ScheduleKind::OneFOneB;
  layout.pp = 2;
  layout.micro_batches = 2;
  const runtime::RankModel model = task->build(layout, 0, {});
  const auto micros = bench::testing::whole_batch(*task, 2);
  const bench::Calibration c = bench::calibrate_rank(model, micros[0], 2, 1, nullptr, false);
  ASSERT_EQ(c.stages.size(), 2u);
  double bytes = 0;
  for (const auto& [name, w] : model.stages[0].parameters) bytes += static_cast<double>(w.nbytes());
  EXPECT_EQ(c.stages[0].grad_bytes, bytes);
  EXPECT_GT(c.stages[0].f, 0);
  EXPECT_GT(c.stages[0].b, 0);
  EXPECT_EQ(c.stages[0].i, 0);  // not a split layout
  EXPECT_EQ(c.stages[0].tp_f.calls, 0);  // no tensor-parallel group
  // Stage 1 is rank 1's to measure: the pipeline group's sum fills it.
  EXPECT_EQ(c.stages[1].f, 0);
  EXPECT_EQ(c.stages[1].grad_bytes, 0);
  EXPECT_EQ(c.pre_f, 0);
}

TEST(Calibration, TheSplitBackwardIsTimedOnlyWhereTheLayoutSplitsIt) {
  const auto task = bench::testing::small_gpt(2);
  schedule::ScheduleOptions layout;
  layout.kind = schedule::ScheduleKind::NoPipelining;
  layout.pp = 1;
  layout.micro_batches = 1;
  const runtime::RankModel model = task->build(layout, 0, {});
  const auto micros = bench::testing::whole_batch(*task, 1);
  const bench::Calibration c = bench::calibrate_rank(model, micros[0], 1, 1, nullptr, true);
  EXPECT_GT(c.stages[0].i, 0);
  EXPECT_GT(c.stages[0].w, 0);
}

TEST(Calibration, TheCostModelPricesEveryFieldAndTheSplitOnlyWhenAsked) {
  bench::Calibration c;
  c.stages = {{1, 2, {3, 40}, {5, 60}, 70, 0.5, 1.5}, {8, 9, {0, 0}, {1, 2}, 10, 4, 5}};
  c.pre_f = 11, c.pre_b = 12, c.pre_grad_bytes = 13;
  EXPECT_EQ(bench::sum_over(c, nullptr).stages[1].w, 5);  // one process: its own
  const schedule::CostModel split = bench::cost_model(c, true);
  const schedule::StageCost s0 = split.stage(0), s1 = split.stage(1);
  EXPECT_EQ(s0.f, 1);
  EXPECT_EQ(s0.b, 2);
  EXPECT_EQ(s0.tp_f.calls, 3);
  EXPECT_EQ(s0.tp_f.bytes, 40);
  EXPECT_EQ(s0.tp_b.calls, 5);
  EXPECT_EQ(s0.tp_b.bytes, 60);
  EXPECT_EQ(s0.grad_bytes, 70);
  EXPECT_EQ(s0.i, 0.5);
  EXPECT_EQ(s0.w, 1.5);
  EXPECT_EQ(s1.f, 8);
  EXPECT_EQ(s1.w, 5);
  EXPECT_EQ(split.pre_f, 11);
  EXPECT_EQ(split.pre_b, 12);
  EXPECT_EQ(split.pre_grad_bytes, 13);
  const schedule::CostModel whole = bench::cost_model(c, false);
  EXPECT_EQ(whole.stage(0).b, 2);
  EXPECT_EQ(whole.stage(0).weight_backward(), 1.0);  // half of b: not the calibrated split
}

}  // namespace
