// `hyperpipe train` end to end for the model families beyond the plain GPT:
// an mHC model and the Hybrid recipes train pipelined, save, and resume under
// another layout on the same loss curve.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "train_run.hpp"

namespace hp::testing {
namespace {

TEST(TrainDist, AnMhcModelTrainsPipelinedAndResumesUnderAnotherLayout) {
  const std::string dir = fresh_dir("mhc");
  const std::string mhc = " --mhc --mhc-streams 3";
  const auto full = train("--nproc 1 --schedule no-pipelining --steps 5" + mhc, dir + "/full.jsonl");
  ASSERT_EQ(full.size(), 5u);
  // Saved by an interleaved pipeline whose every edge carries 3 streams, resumed in one process.
  const auto first = train("--nproc 2 --schedule interleaved --vpp 2 --steps 3 --save " + dir + "/ck" + mhc,
                           dir + "/first.jsonl");
  expect_same_curve(first, std::vector<std::pair<long, double>>(full.begin(), full.begin() + 3));
  expect_same_curve(train("--nproc 1 --schedule no-pipelining --steps 5 --load " + dir + "/ck" + mhc,
                          dir + "/rest.jsonl"),
                    std::vector<std::pair<long, double>>(full.begin() + 3, full.end()));
  // checkpoint ls: global names, shapes and dtypes, the new ones and the old ones alike.
  const auto ls = run_command(hyperpipe() + " checkpoint ls " + dir + "/ck");
  EXPECT_EQ(ls.exit_code, 0) << ls.output;
  for (const char* row : {"layers.7.mlp.fc1.weight", "embedding.word.weight", "Double"})
    EXPECT_NE(ls.output.find(row), std::string::npos) << row << "\n" << ls.output;
  const auto at = ls.output.find("layers.0.attention_hc.mapping_proj.weight");
  ASSERT_NE(at, std::string::npos) << ls.output;
  const std::string line = ls.output.substr(at, ls.output.find('\n', at) - at);
  EXPECT_NE(line.find("[15, 96]"), std::string::npos) << line;  // n^2 + 2n = 15 rows over n * hidden = 96
  EXPECT_NE(ls.output.find("step 3, saved by 2 rank(s)"), std::string::npos) << ls.output;
  const auto missing = run_command(hyperpipe() + " checkpoint ls " + dir + "/nothing");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find(dir + "/nothing: no such directory"), std::string::npos) << missing.output;
  // Without mHC the checkpoint is of another model.
  const auto r = run_command(hyperpipe() + " train" + kModel + " --nproc 1 --schedule no-pipelining --load " + dir + "/ck");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("mhc-streams"), std::string::npos) << r.output;
}

// The spec's functional recipes (hybrid_mhc_tp2_pp2_mtp on 4 ranks as tp 2 x
// pp 2): trained through `hyperpipe train`, saved, resumed in one process on
// the same loss curve.
TEST(TrainDist, HybridMhcRecipesTrainSaveAndResumeUnderAnotherLayout) {
  const std::string dir = fresh_dir("hybrid");
  const std::string hybrid = " --model hybrid --mhc --mhc-streams 2 --moe-experts 3";
  struct Recipe {
    std::string name, pipelined;
  };
  for (const Recipe& r : {Recipe{"hybrid_mhc_pp2_mtp", "--nproc 2 --schedule 1f1b --hybrid-pattern 'M*E|-M*/*-'"},
                          Recipe{"hybrid_mhc_tp2_pp2_mtp", "--nproc 4 --tp 2 --schedule 1f1b --hybrid-pattern 'M*E|-M*/*-'"},
                          Recipe{"hybrid_mhc_pp2_vpp2_empty_mtp",
                                 "--nproc 2 --schedule interleaved --vpp 2 --pseudo-deallocate --hybrid-pattern 'M*||E-|M*/-/-'"}}) {
    SCOPED_TRACE(r.name);
    const std::string pattern = r.pipelined.substr(r.pipelined.find("--hybrid-pattern"));
    const auto full = train("--nproc 1 --schedule no-pipelining --steps 4 " + pattern + hybrid, dir + "/" + r.name + "_full.jsonl");
    ASSERT_EQ(full.size(), 4u);
    const auto first = train(r.pipelined + " --steps 2 --save " + dir + "/" + r.name + hybrid, dir + "/" + r.name + "_a.jsonl");
    expect_same_curve(first, std::vector<std::pair<long, double>>(full.begin(), full.begin() + 2));
    // The metrics carry each MTP depth's loss next to the main loss.
    const auto lines = run_command("cat " + dir + "/" + r.name + "_a.jsonl").output;
    EXPECT_NE(lines.find("\"mtp_loss_1\":5."), std::string::npos) << lines;
    expect_same_curve(train("--nproc 1 --schedule no-pipelining --steps 4 --load " + dir + "/" + r.name + " " + pattern + hybrid,
                            dir + "/" + r.name + "_b.jsonl"),
                      std::vector<std::pair<long, double>>(full.begin() + 2, full.end()));
  }
}

}  // namespace
}  // namespace hp::testing
