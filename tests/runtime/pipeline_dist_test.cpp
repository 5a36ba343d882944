// Distributed equivalence (DESIGN.md section 4): real processes, Gloo, double
// precision; loss and every gradient of one pipelined step equal the
// single-process reference. Each launch runs several cases in one job.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "runtime/launch_workers.hpp"

namespace {

struct Job {
  std::string schedule;
  int pp;
  int vpp;
  std::vector<std::string> cases;  // groups of "MB TIE DEALLOC VARLEN"
};

void PrintTo(const Job& j, std::ostream* os) { *os << j.schedule << " pp=" << j.pp << " vpp=" << j.vpp; }

std::string run(const Job& j, int* code) {
  std::vector<std::string> args = {j.schedule, std::to_string(j.vpp)};
  for (const auto& c : j.cases) {
    std::string cell;
    std::stringstream in(c);
    while (in >> cell) args.push_back(cell);
  }
  return hp::testing::launch_workers("pipeline_worker", j.pp, args, code);
}

class Equivalence : public ::testing::TestWithParam<Job> {};

TEST_P(Equivalence, LossAndEveryGradientMatchTheSingleProcessStep) {
  int code = -1;
  const std::string out = run(GetParam(), &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  // Every rank reports every case, so a case that silently did not run fails.
  EXPECT_EQ(hp::testing::count_of(out, "OK   "), GetParam().pp * static_cast<int>(GetParam().cases.size())) << out;
}

// MB in {1, 3, 4, 8}: MB < PP and MB not divisible by PP included; tied
// embeddings, pseudo-deallocation, varying sequence lengths, mHC (3
// residual streams on every P2P edge) and multi-token prediction (MTP depths
// on the last stage, its embedding copy tied to stage 0's) on and off.
const std::vector<std::string> kCases = {"1 0 0 0 0 0", "3 1 0 0 0 0", "4 0 1 0 0 0", "8 1 1 0 0 0", "3 0 0 1 0 0",
                                         "4 1 1 1 0 0", "3 1 1 0 1 0", "4 0 0 0 1 0", "4 0 0 1 1 0",
                                         "3 0 1 0 0 2", "4 1 0 1 0 1"};

INSTANTIATE_TEST_SUITE_P(
    Schedules, Equivalence,
    ::testing::Values(Job{"gpipe", 2, 1, kCases}, Job{"1f1b", 2, 1, kCases}, Job{"1f1b", 4, 1, kCases},
                      Job{"interleaved", 2, 1, kCases}, Job{"interleaved", 2, 2, kCases},
                      Job{"interleaved", 4, 2, kCases}, Job{"gpipe", 4, 1, {"3 1 1 0 0 0", "8 0 0 1 1 0"}},
                      // The split backward (I then W) of ZB1P, at v 1 (ZB-H1) and 2.
                      Job{"zb1p", 2, 1, kCases}, Job{"zb1p", 2, 2, kCases}, Job{"zb1p", 4, 1, kCases},
                      Job{"zb1p", 4, 2, kCases},
                      // V placement: rank 0 holds the first and the last stage.
                      Job{"zbv", 2, 2, kCases}, Job{"zbv", 4, 2, kCases},
                      // DualPipeV: V placement, MB >= 2 PP, overlapped F&B pairs and the split backward.
                      Job{"dualpipev", 2, 2, {"4 0 0 0 0 0", "5 1 1 0 0 0", "4 0 1 1 0 0", "6 1 0 0 1 0", "5 0 0 1 1 0",
                                              "7 1 1 0 0 2", "4 0 0 1 0 1"}},
                      Job{"dualpipev", 4, 2, {"8 1 1 0 0 0", "10 0 0 1 1 0"}}),
    [](const auto& info) {
      return info.param.schedule + "_pp" + std::to_string(info.param.pp) + "_vpp" + std::to_string(info.param.vpp);
    });

TEST(LearnedShapes, AShapeThatChangesAfterTheFirstStepIsRefusedByTheSender) {
  int code = -1;
  const std::string out = hp::testing::launch_workers("pipeline_worker", 2, {"reshape", "learned"}, &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("REFUSED rank 0: Activation(stage 0, micro 0) is [2, 5, 16]"), std::string::npos) << out;
  EXPECT_NE(out.find("but the first step sent [2, 6, 16]"), std::string::npos) << out;
  EXPECT_NE(out.find("enable variable_seq_len"), std::string::npos) << out;
}

TEST(GivenShapes, AnOutputThatDiffersFromTheModelsOutputSpecIsRefusedByTheSender) {
  int code = -1;
  const std::string out = hp::testing::launch_workers("pipeline_worker", 2, {"reshape", "given"}, &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("REFUSED rank 0: stage 0's output for micro 0 is [2, 5, 16]"), std::string::npos) << out;
  EXPECT_NE(out.find("the model's output_spec says [2, 6, 16]"), std::string::npos) << out;
}

// Receives posted ahead of the list (ExecutorOptions::recv_lookahead): with
// it every receive of a 1F1B step but those the list posts before its first
// compute goes out early; without it none. (Equivalence above runs with the
// default lookahead.)
TEST(RecvLookahead, ReceivesArePostedBeforeTheListReachesThem) {
  for (int n : {0, 4}) {
    int code = -1;
    const std::string out =
        hp::testing::launch_workers("pipeline_worker", 2, {"lookahead", std::to_string(n)}, &code);
    ASSERT_EQ(code, 0) << out;
    // Rank 0 receives 8 gradients, its first compute before all of them;
    // rank 1 receives 8 activations, the first posted by the list before its first compute.
    const std::string pre = "LOOKAHEAD " + std::to_string(n) + " rank ";
    EXPECT_NE(out.find(pre + "0 receives 8 ahead " + (n ? "8" : "0")), std::string::npos) << out;
    EXPECT_NE(out.find(pre + "1 receives 8 ahead " + (n ? "7" : "0")), std::string::npos) << out;
  }
}

}  // namespace
