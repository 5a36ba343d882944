// A step's counters as --metrics records them (train/step_counters.hpp).
#include <gtest/gtest.h>

#include "train/step_counters.hpp"

namespace {

using namespace hp::train;

TEST(StepCounters, OneRanksCountersFillTheSumsThePerRankColumnsAndTheModelsValuesByName) {
  RankStepCounters mine;
  mine.bytes_sent = 10;
  mine.bytes_received = 20;
  mine.optimizer_state_bytes = 30;
  mine.peak_bytes = 40;
  mine.bytes_loaded = 50;
  mine.model_values = {0.5, 0.25};
  StepMetrics m;
  gather_step_counters(mine, {"mtp_1_loss", "mtp_2_loss"}, nullptr, m);
  EXPECT_EQ(m.extra.at("bytes_sent"), 10);
  EXPECT_EQ(m.extra.at("bytes_received"), 20);
  EXPECT_EQ(m.extra.at("optimizer_state_bytes"), 30);
  EXPECT_EQ(m.per_rank.at("peak_bytes"), std::vector<double>{40});
  EXPECT_EQ(m.per_rank.at("bytes_loaded"), std::vector<double>{50});
  EXPECT_EQ(m.extra.at("mtp_1_loss"), 0.5);
  EXPECT_EQ(m.extra.at("mtp_2_loss"), 0.25);
}

TEST(StepCounters, AModelValueARankDoesNotComputeCountsZero) {
  RankStepCounters mine;
  StepMetrics m;
  gather_step_counters(mine, {"mtp_1_loss"}, nullptr, m);
  EXPECT_EQ(m.extra.at("mtp_1_loss"), 0);
  EXPECT_EQ(m.extra.size(), 4u);
}

}  // namespace
