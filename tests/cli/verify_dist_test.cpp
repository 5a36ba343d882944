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

// The split backward (zb1p, zbv, dualpipev) with every model and option it meets: the
// VL tower, mHC recomputed in the backward, context parallelism, the Hybrid
// model; each step equals one process's.
TEST(VerifyDist, SplitSchedulesMatchOneProcessWithEveryModelAndOption) {
  const std::string small = " --layers 4 --hidden 32 --heads 2 --seq-len 16 --micro-batch-size 1 --timeout 30";
  for (const std::string layout :
       {"--nproc 2 --schedule zbv --model vl --mb 4", "--nproc 2 --schedule zb1p --model vl --vpp 2 --mb 3",
        "--nproc 2 --schedule zb1p --mhc --recompute-modules mhc --mb 3",
        "--nproc 2 --schedule zbv --mhc --recompute-modules mhc --mb 2", "--nproc 4 --cp 2 --schedule zb1p --mb 3",
        "--nproc 4 --cp 2 --schedule zbv --mb 2", "--nproc 2 --schedule zbv --model hybrid --hybrid-pattern 'M*|-E|*-|M' --mb 3",
        "--nproc 2 --schedule dualpipev --model vl --mb 4", "--nproc 2 --schedule dualpipev --mhc --recompute-modules mhc --mb 5",
        "--nproc 2 --schedule dualpipev --model hybrid --hybrid-pattern 'M*|-E|*-|M' --mb 4"}) {
    const auto r = run_command(hyperpipe() + " verify " + layout + small, 120);
    EXPECT_EQ(r.exit_code, 0) << layout << "\n" << r.output;
    EXPECT_NE(r.output.find("OK: worst relative error"), std::string::npos) << layout << "\n" << r.output;
  }
}

}  // namespace
}  // namespace hp::testing
