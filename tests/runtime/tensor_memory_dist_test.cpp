// What a rank holds during a step, counted by the tensor-memory allocator on
// four real ranks (pipeline_worker memory): a sent activation is freed as soon
// as it has gone, so 1F1B holds about PP micro-batches on rank 0 whatever MB
// is, GPipe holds all of them, and pseudo-deallocation frees the sent outputs;
// zb1p, zbv and dualpipev hold on every rank what the simulator's memory model
// says (an activation from its F until its W).
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <tuple>
#include <regex>
#include <string>

#include "runtime/launch_workers.hpp"
#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"

namespace {

struct Peaks {
  std::map<std::string, double> bytes;  // "1f1b:16:0 rank 0" -> peak bytes of the second step
  double output_bytes = 0;
};

Peaks run(const std::vector<std::string>& cases, std::string* out) {
  std::vector<std::string> args = {"memory"};
  args.insert(args.end(), cases.begin(), cases.end());
  int code = -1;
  *out = hp::testing::launch_workers("pipeline_worker", 4, args, &code);
  EXPECT_EQ(code, 0) << *out;
  Peaks p;
  const std::regex line(R"(MEMORY (\S+) mb=(\d+) dealloc=(\d) rank (\d) peak_bytes (\d+) output_bytes (\d+))");
  for (std::sregex_iterator it(out->begin(), out->end(), line), end; it != end; ++it) {
    const auto& m = *it;
    p.bytes[m[1].str() + ":" + m[2].str() + ":" + m[3].str() + " rank " + m[4].str()] = std::stod(m[5]);
    p.output_bytes = std::stod(m[6]);
  }
  return p;
}

// The simulator's peak of (chunk, micro-batch) activations a rank holds, each
// from its forward until its backward (B, or W after I) ends.
int simulated_peak_activations(hp::schedule::ScheduleKind kind, int mb, int rank) {
  hp::schedule::ScheduleOptions o;
  o.kind = kind;
  o.pp = 4;
  o.micro_batches = mb;
  o.vpp = hp::schedule::default_vpp(o);
  return hp::schedule::simulate(hp::schedule::generate(o), hp::schedule::CostModel{}).ranks.at(rank).peak_activations;
}

TEST(TensorMemoryDist, OneFOneBHoldsWhatTheSimulatorPredictsAndGPipeGrowsWithTheMicroBatches) {
  std::string out;
  const Peaks p = run({"1f1b:16:0", "1f1b:8:0", "1f1b:16:1", "gpipe:16:0", "gpipe:8:0"}, &out);
  ASSERT_EQ(p.bytes.size(), 20u) << out;
  const double out_b = p.output_bytes;
  // GPipe holds every micro-batch's activations on rank 0 at its peak: the unit.
  const double gpipe16 = p.bytes.at("gpipe:16:0 rank 0"), gpipe8 = p.bytes.at("gpipe:8:0 rank 0");
  const double per_micro = gpipe16 / 16;
  EXPECT_GT(gpipe16, 1.9 * gpipe8) << out;
  const double f16 = p.bytes.at("1f1b:16:0 rank 0"), f8 = p.bytes.at("1f1b:8:0 rank 0");
  const int sim = simulated_peak_activations(hp::schedule::ScheduleKind::OneFOneB, 16, 0);
  EXPECT_EQ(sim, 4);
  EXPECT_LE(f16, (sim + 0.25) * per_micro) << "1F1B rank 0 holds " << f16 / per_micro << " micro-batches\n" << out;
  // Not growing with MB: a sent output is not pinned until the end of the step.
  EXPECT_LE(std::abs(f16 - f8), 2 * out_b) << out;
  // Pseudo-deallocation frees the outputs of the micro-batches in flight but one.
  const double freed = f16 - p.bytes.at("1f1b:16:1 rank 0");
  EXPECT_GE(freed, (sim - 2) * out_b) << "pseudo-deallocation freed " << freed << " bytes\n" << out;
  for (int r = 0; r < 4; ++r) {
    const std::string k = " rank " + std::to_string(r);
    EXPECT_LT(p.bytes.at("1f1b:16:0" + k), p.bytes.at("gpipe:16:0" + k)) << out;
  }
}

// The zero-bubble schedules: every rank's measured peak is the simulator's
// peak of chunk activations within one micro-batch's activations of the rank
// (its two layers). The model has 2 layers per rank: a chunk of zb1p holds
// both, one of zbv or dualpipev (two chunks per rank) one.
TEST(TensorMemoryDist, TheZeroBubbleSchedulesHoldWhatTheSimulatorPredicts) {
  std::string out;
  const Peaks p = run({"gpipe:8:0", "zb1p:8:0", "zbv:8:0", "dualpipev:8:0"}, &out);
  ASSERT_EQ(p.bytes.size(), 16u) << out;
  const double per_micro = p.bytes.at("gpipe:8:0 rank 0") / 8;  // a rank's two layers, one micro-batch
  using K = hp::schedule::ScheduleKind;
  for (auto [kind, name, layers_per_chunk] : {std::tuple{K::ZeroBubble1P, "zb1p", 2}, {K::ZeroBubbleV, "zbv", 1},
                                              {K::DualPipeV, "dualpipev", 1}}) {
    for (int r = 0; r < 4; ++r) {
      const int sim = simulated_peak_activations(kind, 8, r);
      const double measured = p.bytes.at(std::string(name) + ":8:0 rank " + std::to_string(r));
      const double predicted = sim * per_micro * layers_per_chunk / 2;
      std::cout << name << " rank " << r << ": measured " << measured / per_micro << " micro-batches, simulated "
                << predicted / per_micro << "\n";
      EXPECT_NEAR(measured, predicted, per_micro)
          << name << " rank " << r << " holds " << measured / per_micro << " micro-batches, the simulator "
          << predicted / per_micro << "\n" << out;
    }
  }
}

}  // namespace
