// The Hybrid model pipelined (real processes) against its single-process step:
// the spec's functional layouts, with and without tensor parallelism, mHC,
// empty virtual stages, pseudo-deallocation, MB < PP.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/launch_workers.hpp"

namespace {

struct HybridJob {
  std::string schedule;
  int pp, vpp, tp;
  std::vector<std::string> cases;  // PATTERN:MHC:DEALLOC:MB
};

void PrintTo(const HybridJob& j, std::ostream* os) { *os << j.schedule << " pp=" << j.pp << " vpp=" << j.vpp << " tp=" << j.tp; }

class HybridEquivalence : public ::testing::TestWithParam<HybridJob> {};

TEST_P(HybridEquivalence, LossAndEveryGradientMatchTheSingleProcessStep) {
  const HybridJob& j = GetParam();
  std::vector<std::string> args = {j.schedule, std::to_string(j.vpp), std::to_string(j.tp)};
  args.insert(args.end(), j.cases.begin(), j.cases.end());
  int code = -1;
  const std::string out = hp::testing::launch_workers("hybrid_worker", j.pp * j.tp, args, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("FAIL"), std::string::npos) << out;
  EXPECT_EQ(hp::testing::count_of(out, "OK   "), static_cast<int>(j.cases.size()) * j.pp * j.tp) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HybridEquivalence,
    ::testing::Values(
        // hybrid_mhc_pp2(_mtp): two explicit segments, with two MTP depths
        // (the final stage's embedding copy tied to stage 0's); without mHC;
        // an even split.
        HybridJob{"1f1b", 2, 1, 1, {"M*E|-M:1:0:3", "M*E|-M/*-/*-:1:0:3", "M*E|-M/E:0:1:4", "ME*-:1:1:2"}},
        // hybrid_mhc_pp2_vpp2_empty(_mtp): four segments, one empty, the edge
        // from the last rank to the first rank's next chunk carrying the streams.
        HybridJob{"interleaved", 2, 2, 1, {"M*|E|-|M:1:1:4", "M*||E-|M/-*:1:1:3", "M*||E-|M:0:0:2"}},
        // hybrid_mhc_tp2_pp2_mtp: the Mamba mixers (channels), attention
        // (heads), MLPs and MoE experts (inner width), the embedding and the
        // heads of the model and of MTP (vocabulary) split over 2 ranks.
        HybridJob{"1f1b", 2, 1, 2, {"M*E|-M*/*-:1:0:3", "M*E|-M/E:0:1:4"}},
        HybridJob{"no-pipelining", 1, 1, 2, {"ME*-/*-:1:0:2"}},
        // The split backward (ZB1P) over the empty-segment, MTP recipe.
        HybridJob{"zb1p", 2, 2, 1, {"M*||E-|M/-*:1:1:3", "M*|E|-|M:1:0:4"}},
        // V placement: segments 0 and 3 (the MTP depths) on rank 0, the empty one on rank 1.
        HybridJob{"zbv", 2, 2, 1, {"M*||E-|M/-*:1:1:3", "M*|E|-|M:1:0:4"}}),
    [](const auto& info) {
      return info.param.schedule.substr(0, info.param.schedule.find('-')) + "_pp" + std::to_string(info.param.pp) +
             "_v" + std::to_string(info.param.vpp) + "_tp" + std::to_string(info.param.tp);
    });

}  // namespace
