// Data and tensor parallelism around the pipeline (issue 14): dp replicas of
// a pipeline whose ranks split the GPT over a tp group, real processes over
// Gloo subgroups of one mesh; each step's loss and every rank's share of every
// averaged gradient equal one process's step over the whole global batch
// (double precision, 1e-10 relative), with gradient accumulation reducing once
// per optimizer step.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/launch_workers.hpp"

namespace {

struct MeshJob {
  std::string schedule;
  int pp, vpp, dp, tp, cp;
  std::vector<std::string> cases;  // MB:TIE:MHC:MTP:ACCUM:BUCKET_BYTES
};

void PrintTo(const MeshJob& j, std::ostream* os) {
  *os << j.schedule << " pp=" << j.pp << " vpp=" << j.vpp << " dp=" << j.dp << " tp=" << j.tp << " cp=" << j.cp;
}

class Mesh : public ::testing::TestWithParam<MeshJob> {};

TEST_P(Mesh, LossAndEveryGradientMatchOneProcessOverTheGlobalBatch) {
  const MeshJob& j = GetParam();
  std::vector<std::string> args = {j.schedule, std::to_string(j.pp), std::to_string(j.vpp), std::to_string(j.dp),
                                   std::to_string(j.tp), std::to_string(j.cp)};
  args.insert(args.end(), j.cases.begin(), j.cases.end());
  int code = -1;
  const std::string out = hp::testing::launch_workers("mesh_worker", j.pp * j.dp * j.tp * j.cp, args, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  // Every rank reports every case, so a case that silently did not run fails.
  EXPECT_EQ(hp::testing::count_of(out, "OK   "), j.pp * j.dp * j.tp * j.cp * static_cast<int>(j.cases.size())) << out;
}

// Buckets of 512 bytes cut every stage into several; 1 MiB keeps each whole.
// MB 1 and 3 (below PP, not divisible by it), tied embeddings, mHC and MTP
// (whose auxiliary loss is weighted per replica; under tp without sequence
// parallelism, not under cp) on and off, accumulation.
INSTANTIATE_TEST_SUITE_P(
    Meshes, Mesh,
    ::testing::Values(MeshJob{"1f1b", 2, 1, 2, 1, 1, {"3:1:0:0:1:512", "1:0:1:0:2:512", "2:0:0:2:1:512", "4:0:0:0:1:1048576"}},
                      MeshJob{"interleaved", 2, 2, 2, 1, 1, {"3:1:0:1:2:512", "2:0:1:0:1:2048"}},
                      MeshJob{"mpipe", 2, 1, 2, 1, 1, {"3:1:0:0:2:512"}},
                      MeshJob{"gpipe", 1, 1, 3, 1, 1, {"2:1:0:1:2:512"}},
                      MeshJob{"no-pipelining", 1, 1, 1, 2, 1, {"2:1:0:0:1:512", "3:0:1:0:2:512", "2:1:1:0:2:512:1", "2:0:1:2:1:512"}},
                      MeshJob{"1f1b", 2, 1, 1, 2, 1, {"3:1:0:0:2:512", "1:0:1:0:1:512", "3:1:0:0:1:512:1", "3:1:0:1:2:512"}},
                      MeshJob{"interleaved", 2, 2, 1, 2, 1, {"3:1:1:0:1:512", "3:0:1:0:2:512:1"}},
                      MeshJob{"mpipe", 2, 1, 1, 2, 1, {"3:1:0:0:1:512", "2:1:0:0:2:512:1"}},
                      MeshJob{"1f1b", 2, 1, 2, 2, 1, {"2:1:0:0:2:512", "2:0:1:0:1:512:1"}},
                      MeshJob{"interleaved", 2, 2, 2, 2, 1, {"3:1:1:0:1:512"}},
                      MeshJob{"mpipe", 2, 1, 2, 2, 1, {"2:1:0:1:2:512"}},
                      MeshJob{"no-pipelining", 1, 1, 1, 1, 2, {"2:1:0:0:1:512", "3:0:1:0:2:512"}},
                      MeshJob{"1f1b", 2, 1, 1, 1, 2, {"3:1:0:0:2:512", "1:0:1:0:1:512"}},
                      MeshJob{"interleaved", 2, 2, 1, 1, 2, {"3:1:1:0:1:512"}},
                      MeshJob{"mpipe", 2, 1, 1, 1, 2, {"2:1:0:0:2:512"}},
                      MeshJob{"1f1b", 2, 1, 1, 2, 2, {"2:1:1:0:1:512"}},
                      MeshJob{"gpipe", 1, 1, 2, 1, 2, {"2:1:0:0:2:512"}},
                      // The split backward under dp and tp ...
                      MeshJob{"zb1p", 2, 1, 2, 1, 1, {"3:1:0:0:2:512", "5:0:1:0:1:1048576"}},
                      MeshJob{"zb1p", 2, 2, 1, 2, 1, {"3:1:1:0:1:512", "2:0:0:0:2:512:1", "2:1:0:1:1:512"}},
                      MeshJob{"zbv", 2, 2, 2, 1, 1, {"3:1:0:1:2:512", "2:0:1:0:1:2048"}},
                      MeshJob{"dualpipev", 2, 2, 2, 1, 1, {"5:1:0:1:2:512"}},
                      MeshJob{"dualpipev", 2, 2, 1, 2, 1, {"4:1:1:0:1:512"}},
                      // ... and under context parallelism.
                      MeshJob{"zb1p", 2, 1, 1, 1, 2, {"3:1:0:0:2:512", "1:0:1:0:1:512"}},
                      MeshJob{"zbv", 2, 2, 1, 1, 2, {"3:1:1:0:1:512"}}),
    [](const auto& info) {
      const auto& j = info.param;
      return j.schedule.substr(0, j.schedule.find('-')) + "_pp" + std::to_string(j.pp) + "_vpp" + std::to_string(j.vpp) +
             "_dp" + std::to_string(j.dp) + "_tp" + std::to_string(j.tp) + "_cp" + std::to_string(j.cp);
    });

}  // namespace
