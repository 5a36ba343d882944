// Fault injection (train/fault_injection.hpp): a plan acts only on the rank,
// step and start of the job it names, and a nospace plan fails only that
// save's shard writes.
// (The exiting kinds end the process; tests/cli's fault tests run them.)
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>

#include "train/checkpoint.hpp"
#include "train/fault_injection.hpp"

namespace {

using namespace hp::train;

FaultInjection nospace_at(int rank, std::int64_t step) {
  FaultInjection plan;
  plan.rank = rank;
  plan.step = step;
  plan.kind = "nospace";
  return plan;
}

// One shard of one parameter; the error of the write, or "".
std::string write_shard(const std::string& dir, std::int64_t step) {
  NamedParams params{{"w", at::ones({1 << 16})}};
  try {
    write_checkpoint_shard(dir, step, 0, 1, params, AdamWState{});
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(FaultInjection, APlanHitsOnlyTheRankStepAndStartItNames) {
  FaultInjection plan = nospace_at(1, 5);
  EXPECT_TRUE(plan.hits(1, 5, 0));
  EXPECT_FALSE(plan.hits(0, 5, 0));
  EXPECT_FALSE(plan.hits(1, 4, 0));
  EXPECT_FALSE(plan.hits(1, 5, 1));  // a restarted job: the fault struck once
  plan.attempt = -1;
  EXPECT_TRUE(plan.hits(1, 5, 1));  // ... or at every start
  plan.attempt = 2;
  EXPECT_FALSE(plan.hits(1, 5, 1));
  EXPECT_TRUE(plan.hits(1, 5, 2));
  EXPECT_FALSE(FaultInjection{}.hits(0, 0, 0));  // rank -1: none
  inject_step_fault(FaultInjection{}, 0, 1, 0);  // returns: no plan
  inject_step_fault(nospace_at(0, 1), 0, 1, 0);  // returns: nospace acts in the save
}

TEST(FaultInjection, ANospacePlanFailsThatSavesShardHalfwayAndNothingElse) {
  const std::string dir = ::testing::TempDir() + "hp_fault_injection_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const FaultInjection plan = nospace_at(0, 3);
  {
    const SaveFaultScope other_step(plan, 0, 2, 0);
    EXPECT_EQ(write_shard(dir, 2), "");
  }
  {
    const SaveFaultScope other_rank(plan, 1, 3, 0);
    EXPECT_EQ(write_shard(dir, 3), "");
  }
  {
    const SaveFaultScope other_start(plan, 0, 3, 1);
    EXPECT_EQ(write_shard(dir, 3), "");
  }
  {
    const SaveFaultScope hit(plan, 0, 3, 0);
    const std::string error = write_shard(dir, 3);
    EXPECT_NE(error.find("No space left on device"), std::string::npos) << error;
    EXPECT_NE(error.find("bytes written"), std::string::npos) << error;
  }
  EXPECT_EQ(write_shard(dir, 3), "");  // the scope is gone, and with it the fault
  std::filesystem::remove_all(dir);
}

}  // namespace
