// The distributed optimizer (train/distributed_optimizer.hpp, ZeRO-1) with real
// processes: distributed_optimizer_worker on 1, 2 and 3 ranks (through
// launch_local, a fresh store file per run) checks on every rank that the
// parameters, full_state() and a load_state()d optimizer equal a plain AdamW's
// (train/adamw.hpp) that the rank runs itself on a copy of the parameters.
// Here: every rank said so, and each kept the shard of the state that the
// deal promises (name order, to the least loaded rank by elements), uneven at
// 2 and 3 ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "worker_run.hpp"

namespace {

// AdamW's state is 2 tensors per parameter: 16 bytes an element in float64
// (a 64, b 7, c 30, d 100, e 3), 8 in float32 (f 20): 3424 bytes in all.
struct Shards {
  int nproc;
  std::vector<long> state_bytes;  // by rank
};

// Its rank count (ctest names each test by it).
void PrintTo(const Shards& s, std::ostream* os) { *os << s.nproc; }

class DistributedOptimizerDist : public ::testing::TestWithParam<Shards> {};

TEST_P(DistributedOptimizerDist, ParametersAndStateEqualPlainAdamWsWhateverTheShards) {
  const Shards& want = GetParam();
  const hp::testing::WorkerRun r =
      hp::testing::run_workers({"distributed_optimizer_worker", {}, want.nproc, 30, 120});
  EXPECT_EQ(r.code, 0) << r.all();
  long total = 0;
  for (int k = 0; k < want.nproc; ++k) {
    const std::string rank = "[rank " + std::to_string(k) + "] rank " + std::to_string(k) + ": ";
    EXPECT_TRUE(r.has(rank + "ok")) << r.all();
    EXPECT_TRUE(r.has(rank + "state bytes " + std::to_string(want.state_bytes[k]) + "\n")) << r.all();
    total += want.state_bytes[k];
  }
  EXPECT_EQ(total, 3424);
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, DistributedOptimizerDist,
    ::testing::Values(
        // One rank: the whole state, as plain AdamW.
        Shards{1, {3424}},
        // Rank 0: a, e, f (87 elements); rank 1: b, c, d (137).
        Shards{2, {64 * 16 + 3 * 16 + 20 * 8, 137 * 16}},
        // Rank 0: a (64); rank 1: b, d (107); rank 2: c, e, f (53).
        Shards{3, {64 * 16, 107 * 16, 33 * 16 + 20 * 8}}),
    [](const ::testing::TestParamInfo<Shards>& info) { return std::to_string(info.param.nproc); });

}  // namespace
