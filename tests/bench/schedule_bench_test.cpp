// A bench row (bench/schedule_bench.hpp): the layout each bench.schedules
// entry runs as, and a row's fields from one process.
#include <gtest/gtest.h>

#include "bench/bench_fixture.hpp"
#include "bench/schedule_bench.hpp"
#include "runtime/tensor_memory.hpp"
#include "schedule/generate.hpp"

namespace {

using namespace hp;

std::string row_error(const bench::BenchOptions& o, const std::string& name, int world, const train::Task& task) {
  try {
    bench::row_options(o, name, world, task);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(ScheduleBench, EachEntryRunsAsItsScheduleWithTheVppOnlyChunkedRowsTake) {
  const auto task = bench::testing::small_gpt(8);
  bench::BenchOptions o;
  o.schedule.micro_batches = 4;
  o.schedule.vpp = 2;
  auto s = bench::row_options(o, "interleaved", 4, *task).schedule;
  EXPECT_EQ(s.kind, schedule::ScheduleKind::Interleaved);
  EXPECT_EQ(s.pp, 4);
  EXPECT_EQ(s.vpp, schedule::default_vpp(s));  // no vpp given: the schedule's own
  o.vpp_given = true;
  EXPECT_EQ(bench::row_options(o, "interleaved", 4, *task).schedule.vpp, 2);
  EXPECT_EQ(bench::row_options(o, "1f1b", 4, *task).schedule.vpp, 1);  // not chunked
  s = bench::row_options(o, "mpipe/1f1b", 4, *task).schedule;
  EXPECT_EQ(s.kind, schedule::ScheduleKind::MPipe);
  EXPECT_EQ(s.mpipe.body, schedule::ScheduleKind::OneFOneB);
  EXPECT_EQ(s.vpp, 1);
  EXPECT_EQ(bench::row_options(o, "no-pipelining", 4, *task).schedule.pp, 1);  // rank 0 alone
  o.dp = 2;
  EXPECT_EQ(bench::row_options(o, "1f1b", 4, *task).schedule.pp, 2);  // the ranks are dp x pp
}

TEST(ScheduleBench, AnEntryItCannotRunIsRefusedByName) {
  const auto task = bench::testing::small_gpt(8);
  bench::BenchOptions o;
  EXPECT_EQ(row_error(o, "1f1b/gpipe", 2, *task).rfind("bench.schedules: unknown schedule '1f1b/gpipe'; allowed: ", 0), 0u);
  EXPECT_EQ(row_error(o, "mpipe/zigzag", 2, *task).rfind("bench.schedules: unknown schedule 'mpipe/zigzag'", 0), 0u);
  o.tp = 2;
  EXPECT_NE(row_error(o, "no-pipelining", 2, *task).find("does not combine with mesh.dp or model.tensor_parallel.size"),
            std::string::npos);
  o.tp = 1;
  // The task validates the layout: 8 layers over 3 x 3 stages do not split.
  o.schedule.vpp = 3;
  o.vpp_given = true;
  EXPECT_FALSE(row_error(o, "interleaved", 3, *task).empty());
}

TEST(ScheduleBench, AOneProcessRowHasNoBubbleAndIsSimulatedAsItsCalibratedCompute) {
  runtime::tensor_memory::install();
  const auto task = bench::testing::small_gpt(2);
  bench::BenchOptions o;
  o.schedule.micro_batches = 3;
  o.steps = 2;
  o.calibration_reps = 1;
  std::vector<std::string> steps;
  const bench::BenchRow row = bench::bench_schedule(o, *task, "no-pipelining", train::make_place(nullptr, 1, 1, 1, 1),
                                                    [&](const std::string& label) { steps.push_back(label); });
  EXPECT_TRUE(row.filled);
  EXPECT_EQ(steps, (std::vector<std::string>{"no-pipelining v1", "no-pipelining v1"}));
  EXPECT_EQ(row.layout.pp, 1);
  EXPECT_EQ(row.layout.micro_batches, 3);
  EXPECT_GT(row.measured_ms, 0);
  // One stage: the simulated step is its forwards and backwards, the ideal step.
  EXPECT_NEAR(row.simulated_ms, row.ideal_ms, 1e-9 * row.ideal_ms);
  EXPECT_EQ(row.simulated_bubble, 0);
  EXPECT_FALSE(row.theory_bubble);  // no pipeline, no formula
  EXPECT_FALSE(row.stage0);         // not split
  EXPECT_FALSE(row.mpipe_measured);
  EXPECT_FALSE(row.data_parallel);
  EXPECT_FALSE(row.tensor_parallel);
  ASSERT_EQ(row.peak_bytes.size(), 1u);
  EXPECT_GT(row.peak_bytes[0], 0);
  ASSERT_EQ(row.traced.size(), 1u);
  // One process waits for nothing: its bubble in the traced step is the runtime around its compute.
  EXPECT_GE(row.bubble_in_step(), 0);
  EXPECT_LT(row.bubble_in_step(), 0.2);
  EXPECT_TRUE(row.ops.empty());
  EXPECT_EQ(row.label(), "no-pipelining v1");
}

}  // namespace
