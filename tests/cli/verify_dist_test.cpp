// `hyperpipe verify` end to end: one step of a layout on real local ranks
// against one float64 process, every gradient named with its error.
#include <gtest/gtest.h>

#include <string>

#include "run_command.hpp"

namespace hp::testing {
namespace {

// hyperpipe verify: train's flags, one step against one process in float64;
// every parameter listed with its error, the worst first; past --tolerance
// it fails.
TEST(VerifyDist, OneStepOfALayoutAgainstOneProcessNamesEveryGradient) {
  const std::string layout = hyperpipe() +
                             " verify --nproc 4 --dp 2 --schedule interleaved --vpp 2 --mb 3 --layers 4 --hidden 32"
                             " --heads 2 --seq-len 16 --micro-batch-size 1 --tie-embeddings --timeout 30";
  const auto ok = run_command(layout, 120);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("against one process, float64"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("OK: worst relative error"), std::string::npos) << ok.output;
  for (const char* name : {"  embedding.word.weight\n", "  layers.3.mlp.fc2.weight\n", "  final_norm.bias\n"})
    EXPECT_NE(ok.output.find(name), std::string::npos) << name << ok.output;
  const auto strict = run_command(layout + " --tolerance 0", 120);
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_NE(strict.output.find("FAILED: worst relative error"), std::string::npos) << strict.output;
}

}  // namespace
}  // namespace hp::testing
