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

#include "launch/launcher.hpp"

namespace {

struct OptimizerRun {
  int code = -1;
  std::string output;
  bool has(const std::string& needle) const { return output.find(needle) != std::string::npos; }
};

OptimizerRun run_optimizer_worker(int nproc) {
  hp::launch::LaunchOptions o;
  o.nproc = nproc;
  o.command = {std::string(HP_BIN_DIR) + "/distributed_optimizer_worker"};
  o.extra_env = {{"HP_TIMEOUT_S", "30"}, {"OMP_NUM_THREADS", "1"}};
  o.shutdown_grace = std::chrono::seconds(2);
  o.job_timeout = std::chrono::seconds(120);
  OptimizerRun r;
  o.on_output = [&](const hp::launch::LaunchOutput& l) { r.output += l.formatted() + "\n"; };
  r.code = hp::launch::launch_local(o);
  return r;
}

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
  const OptimizerRun r = run_optimizer_worker(want.nproc);
  EXPECT_EQ(r.code, 0) << r.output;
  long total = 0;
  for (int k = 0; k < want.nproc; ++k) {
    const std::string rank = "[rank " + std::to_string(k) + "] rank " + std::to_string(k) + ": ";
    EXPECT_TRUE(r.has(rank + "ok")) << r.output;
    EXPECT_TRUE(r.has(rank + "state bytes " + std::to_string(want.state_bytes[k]) + "\n")) << r.output;
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
