// The simulator around the pipeline: the tensor-parallel all-reduces inside
// each forward and backward, and the data-parallel gradient buckets after the
// last backward (schedule/simulate.hpp's Collectives and bucket model).
#include "schedule/simulate.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "hand_schedules.hpp"
#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

using testing::layout;
using testing::uniform;

TEST(SimulateMeshTest, TensorParallelAllReducesLengthenEveryForwardAndBackward) {
  CostModel c = uniform(1.0, 2.0);
  c.tp = 2;
  c.tp_latency = 0.1;
  c.tp_bw = 1000;
  // Two all-reduces of 500 bytes: 2 x 0.1 + 2 (2 - 1) / 2 x 1000 / 1000 = 1.2.
  for (int s = 0; s < 2; ++s) c.per_stage[s].tp_f = c.per_stage[s].tp_b = {2, 1000};
  EXPECT_DOUBLE_EQ(c.tp_time({2, 1000}), 1.2);
  for (int mb : {1, 2, 5}) {
    const SimulationReport r = simulate(generate(layout(ScheduleKind::OneFOneB, 2, 1, mb)), c);
    EXPECT_DOUBLE_EQ(r.step_time, (mb + 1) * (2.2 + 3.2)) << "mb " << mb;
  }
  c.tp = 1;  // one rank: no all-reduce costs anything
  EXPECT_DOUBLE_EQ(simulate(generate(layout(ScheduleKind::OneFOneB, 2, 1, 2)), c).step_time, 3 * 3.0);
}

TEST(SimulateMeshTest, DataParallelBucketsReduceOneAfterAnotherFromTheLastBackward) {
  CostModel c = uniform(1.0, 2.0);
  c.dp = 2;
  c.dp_bw = 10;
  c.bucket_bytes = 50;
  c.per_stage[0].grad_bytes = 100;
  // One rank, two micro-batches: the last backward runs from 4 to 6; the
  // buckets (50 bytes: 5 each) are ready at 5 and 6 and reduce from 5 to 10
  // and from 10 to 15.
  const SimulationReport r = simulate(generate(layout(ScheduleKind::NoPipelining, 1, 1, 2)), c);
  EXPECT_DOUBLE_EQ(r.ranks[0].compute_end, 6.0);
  EXPECT_DOUBLE_EQ(r.ranks[0].grad_sync_end, 15.0);
  EXPECT_DOUBLE_EQ(r.step_time, 15.0);
  // One bucket: ready when the backward ends.
  c.bucket_bytes = 1000;
  EXPECT_DOUBLE_EQ(simulate(generate(layout(ScheduleKind::NoPipelining, 1, 1, 2)), c).step_time, 16.0);
  // The preprocess's gradients wait for the end of the step.
  c.pre_grad_bytes = 10;
  EXPECT_DOUBLE_EQ(simulate(generate(layout(ScheduleKind::NoPipelining, 1, 1, 2)), c).step_time, 17.0);
  c.dp = 1;  // no replicas: nothing to average
  EXPECT_DOUBLE_EQ(simulate(generate(layout(ScheduleKind::NoPipelining, 1, 1, 2)), c).step_time, 6.0);
}

TEST(SimulateMeshTest, AnEarlierChunksGradientsReduceUnderTheLaterBackward) {
  // Interleaved: each rank's later chunk finishes its backwards first, and its
  // average (1 unit) hides under the earlier chunk's last backward (2 units);
  // only the last chunk's average is exposed.
  for (int pp : {2, 4}) {
    CostModel c = uniform(1.0, 2.0);
    const Schedule s = generate(layout(ScheduleKind::Interleaved, pp, 2, 2 * pp));
    const double alone = simulate(s, c).step_time;
    c.dp = 2;
    c.dp_bw = 100;
    for (int st = 0; st < 2 * pp; ++st) c.per_stage[st].grad_bytes = 100;
    const SimulationReport r = simulate(s, c);
    for (int rank = 0; rank < pp; ++rank)
      EXPECT_DOUBLE_EQ(r.ranks[rank].grad_sync_end, r.ranks[rank].compute_end + 1.0) << "pp " << pp << " rank " << rank;
    EXPECT_DOUBLE_EQ(r.step_time, alone + 1.0) << "pp " << pp;
  }
}

TEST(SimulateMeshTest, MeshCostsAreValidated) {
  CostModel c;
  c.dp = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = CostModel{};
  c.bucket_bytes = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = CostModel{};
  c.per_stage[1].tp_f.calls = -1;
  try {
    c.validate();
    FAIL() << "negative calls accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("costs.per_stage[1].tp_f.calls"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hp::schedule
