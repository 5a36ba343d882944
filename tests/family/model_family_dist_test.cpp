// A model family registered by a program of its own (family_worker.cpp: one
// register_family call, then hyperpipe's main) trains and verifies through
// hyperpipe's commands, pipelined over real processes; the hyperpipe binary
// itself does not know it.
#include <gtest/gtest.h>

#include "cli/run_command.hpp"

namespace {

using hp::testing::fresh_dir;
using hp::testing::hyperpipe;
using hp::testing::read_losses;
using hp::testing::run_command;

std::string family_worker() { return std::string(HP_BIN_DIR) + "/family_worker"; }

const std::string kModel = " --model residual-mlp --layers 4 --hidden 8 --micro-batch-size 3";

TEST(ModelFamilyDist, ARegisteredFamilyVerifiesAgainstOneProcessUnderEveryPipelinedSchedule) {
  for (const std::string layout : {"--schedule 1f1b --mb 3", "--schedule interleaved --vpp 2 --mb 3",
                                   "--schedule gpipe --mb 1", "--schedule zb1p --mb 5"}) {
    const auto r = run_command(family_worker() + " verify --nproc 2 --timeout 60" + kModel + " " + layout);
    EXPECT_EQ(r.exit_code, 0) << layout << "\n" << r.output;
    EXPECT_NE(r.output.find("OK: worst relative error"), std::string::npos) << layout << "\n" << r.output;
    EXPECT_NE(r.output.find("embed.weight"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("block3.fc.weight"), std::string::npos) << r.output;
  }
}

TEST(ModelFamilyDist, ARegisteredFamilyTrainsPipelinedOnTheOneProcessCurve) {
  const std::string dir = fresh_dir("family_train");
  for (const std::string nproc : {"1", "2"}) {
    const auto r = run_command(family_worker() + " train --nproc " + nproc + " --timeout 60 --dtype float64 --steps 4" +
                               kModel + " --mb 4 --schedule 1f1b --lr 0.01 --metrics " + dir + "/m" + nproc + ".jsonl");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("residual MLP: --layers 4, --hidden 8"), std::string::npos) << r.output;
  }
  const auto one = read_losses(dir + "/m1.jsonl"), two = read_losses(dir + "/m2.jsonl");
  ASSERT_EQ(one.size(), 4u);
  ASSERT_EQ(two.size(), 4u);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(two[i].second, one[i].second, 1e-10 * std::abs(one[i].second));
  EXPECT_LT(one.back().second, one.front().second);  // it learns
}

TEST(ModelFamilyDist, OnlyTheProgramThatRegistersAFamilyKnowsIt) {
  const auto help = run_command(family_worker() + " train --help");
  EXPECT_NE(help.output.find("residual-mlp: a residual MLP regressor"), std::string::npos) << help.output;
  const auto plain = run_command(hyperpipe() + " train --model residual-mlp");
  EXPECT_EQ(plain.exit_code, 2) << plain.output;
  EXPECT_NE(plain.output.find("--model: must be one of gpt, hybrid, vl, got 'residual-mlp'"), std::string::npos) << plain.output;
}

}  // namespace
