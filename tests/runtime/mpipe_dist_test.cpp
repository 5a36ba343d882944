// MPipe Transpose distributed equivalence (DESIGN.md section 4): real
// processes over Gloo, double precision. Loss and every gradient (preprocess
// and body) of MPipe steps equal the single-process reference for T = 0, 1, 2,
// overflow full and min, centralized recompute and owner-backward, PP 2 and 4,
// v 1 and 2, MB < PP and MB > PP, tied embeddings, gradient accumulation, and
// at v 1 the 1F1B and GPipe bodies besides the interleaved one, and the
// zero-bubble bodies (zb1p at v 1 and 2, zbv and dualpipev at v 2). One
// launched job per (PP, v) runs many cases to keep process start-up off the bill.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "runtime/launch_workers.hpp"

namespace {

std::string run(int nproc, const std::vector<std::string>& args, int* code) {
  return hp::testing::launch_workers("mpipe_worker", nproc, args, code);
}

struct MPipeJob {
  std::string name;
  int pp;
  std::vector<std::string> args;  // mode, vpp, cases
};

void PrintTo(const MPipeJob& j, std::ostream* os) {
  *os << j.name << " pp=" << j.pp << " " << j.args.size() - 2 << " cases";
}

class MPipeDist : public ::testing::TestWithParam<MPipeJob> {};

TEST_P(MPipeDist, EveryCasePassesOnEveryRank) {
  const MPipeJob& j = GetParam();
  int code = -1;
  const std::string out = run(j.pp, j.args, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(hp::testing::count_of(out, "FAIL"), 0) << out;
  // Every rank reports every case, so a case that silently did not run fails.
  EXPECT_EQ(hp::testing::count_of(out, "OK   "), j.pp * static_cast<int>(j.args.size() - 2)) << out;
}

// MB:T:OVERFLOW:OWNER_BACKWARD:TIE:ACCUM[:VARLEN[:BODY]] (VARLEN: lengths 7, 3, 5
// with shape meta messages and pseudo-deallocation; BODY: interleaved, 1f1b,
// gpipe, and the zero-bubble zb1p, zbv, dualpipev)
const std::vector<std::string> kPP2 = {"equiv", "1", "2:0:full:0:0:1", "4:0:min:0:1:1", "2:1:full:0:0:1",
                                       "4:1:min:0:0:1", "8:2:full:0:1:1", "8:2:min:0:0:2", "4:1:full:1:0:2",
                                       "8:2:min:1:1:1", "2:2:full:1:0:1", "4:1:full:0:0:1:1",
                                       "4:2:min:1:0:1:1", "2:0:full:0:0:1:1", "4:1:full:0:0:1:0:1f1b",
                                       "3:2:min:1:0:1:0:gpipe", "5:1:min:0:1:2:1:1f1b", "4:1:full:0:0:1:0:zb1p",
                                       "3:2:min:1:1:1:0:zb1p", "5:1:min:0:0:2:1:zb1p"};
const std::vector<std::string> kPP2V2 = {"equiv", "2", "2:0:full:0:0:1", "4:1:full:0:1:1", "4:2:min:0:0:1",
                                         "8:1:min:1:0:2", "4:2:full:1:1:1", "4:0:full:0:0:1:1",
                                         "3:1:full:0:1:1:0:zb1p", "4:1:full:0:1:1:0:zbv", "3:2:min:1:0:2:0:zbv",
                                         "5:1:full:0:0:1:0:dualpipev", "6:2:min:1:1:2:1:dualpipev"};
const std::vector<std::string> kPP4 = {"equiv", "1", "2:1:full:0:0:1", "2:0:min:0:1:1", "4:2:full:0:0:1",
                                       "8:1:min:0:1:1", "8:0:full:0:0:1", "2:2:min:1:0:1", "8:1:full:1:1:2",
                                       "4:1:min:1:0:1", "8:2:full:0:0:1:1", "4:0:min:0:0:1:1", "4:1:full:0:0:1:1",
                                       "8:1:full:0:0:1:0:1f1b", "6:2:min:1:0:2:0:1f1b", "2:1:full:0:1:1:0:gpipe",
                                       "5:0:full:0:0:1:1:gpipe", "7:2:full:1:0:1:0:gpipe"};
const std::vector<std::string> kPP4V2 = {"equiv", "2", "8:1:full:0:0:1", "4:2:min:0:1:1", "8:0:min:0:0:1",
                                         "8:2:full:1:0:1", "4:1:min:1:1:2", "8:1:full:0:0:1:1",
                                         "8:2:full:1:0:1:0:dualpipev", "5:1:min:0:1:1:0:zbv"};

// VL, MB:T:OVERFLOW:OWNER_BACKWARD:FROZEN:ACCUM; T counts tower blocks (V = 2),
// T = V transposes the whole tower; frozen towers over two runs (broadcast once).
const std::vector<std::string> kVLPP2 = {"vl",           "1",           "2:0:full:0:0:1", "4:1:full:0:0:1",
                                         "4:2:min:0:0:2", "8:2:full:1:0:2", "2:1:min:1:0:1",  "4:2:full:0:1:2",
                                         "8:1:min:0:1:2", "4:0:full:0:1:1", "4:1:full:0:1:2:0:1f1b",
                                         "3:2:min:1:0:1:0:gpipe"};
const std::vector<std::string> kVLPP4V2 = {"vl", "2", "8:2:full:0:1:2", "2:1:min:0:0:1", "8:1:full:1:0:1",
                                           "4:2:min:0:0:1", "8:0:min:0:0:1"};

INSTANTIATE_TEST_SUITE_P(Layouts, MPipeDist,
                         ::testing::Values(MPipeJob{"pp2_v1", 2, kPP2}, MPipeJob{"pp2_v2", 2, kPP2V2}, MPipeJob{"pp4_v1", 4, kPP4},
                                           MPipeJob{"pp4_v2", 4, kPP4V2}, MPipeJob{"vl_pp2_v1", 2, kVLPP2},
                                           MPipeJob{"vl_pp4_v2", 4, kVLPP4V2}),
                         [](const auto& info) { return info.param.name; });

TEST(MPipeDistBadInput, APreprocessThatDiffersOnOneRankFailsEveryRankNamingIt) {
  int code = -1;
  const std::string out = run(3, {"mismatch", "1", "1"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(hp::testing::count_of(out, "EXPECTED"), 3) << out;
  EXPECT_EQ(hp::testing::count_of(out, "differs between ranks: rank 1 ("), 3) << out;
  EXPECT_EQ(hp::testing::count_of(out, "rank 2 ("), 0) << out;
}

}  // namespace
