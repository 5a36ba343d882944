// `hyperpipe generate` end to end: a model trained on the embedded corpus
// continues prompts in its grammar's characters, with the same tokens under
// every decoding layout, with and without the KV cache; mHC decodes on one
// rank only; bad input is one line before any rank starts.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "run_command.hpp"

namespace hp::testing {
namespace {

const std::vector<std::string> kPrompts = {"The cat", "A dog likes", "My sister paints the"};

// What generate printed for each prompt (its own lines, without the launcher's prefix).
std::vector<std::string> continuations(const std::string& output) {
  std::vector<std::string> out;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    for (const auto& p : kPrompts)
      if (auto at = line.find(p); at != std::string::npos && out.size() < kPrompts.size() &&
                                  p == kPrompts[out.size()])
        out.push_back(line.substr(at + p.size()));
  return out;
}

class GenerateDist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fresh_dir("generate");
    const auto r = run_command(hyperpipe() + " train --nproc 2 --steps 80 --log-interval 80 --timeout 60 --save " +
                                   dir_ + "/ck",
                               300);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ofstream(dir_ + "/prompts.txt") << kPrompts[0] << "\n" << kPrompts[1] << "\n" << kPrompts[2] << "\n";
  }
  static std::string generate(const std::string& args, int expect_exit = 0) {
    const auto r = run_command(hyperpipe() + " generate --load " + dir_ + "/ck --timeout 60 " + args, 120);
    EXPECT_EQ(r.exit_code, expect_exit) << args << "\n" << r.output;
    return r.output;
  }
  static std::string dir_;
};
std::string GenerateDist::dir_;

TEST_F(GenerateDist, ContinuesInTheGrammarsCharactersWithTheSameTokensOnEveryLayout) {
  const std::string common = "--prompts " + dir_ + "/prompts.txt --max-new-tokens 12";
  const auto ref = continuations(generate("--nproc 1 " + common));
  ASSERT_EQ(ref.size(), kPrompts.size());
  const std::string grammar = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .";
  for (const auto& c : ref) {
    EXPECT_EQ(c.size(), 12u) << c;
    EXPECT_EQ(c.find_first_not_of(grammar), std::string::npos) << "'" << c << "' leaves the embedded grammar";
  }
  for (const std::string layout : {"--nproc 2", "--nproc 4", "--nproc 2 --vpp 2", "--nproc 1 --no-kv-cache",
                                   "--nproc 4 --no-kv-cache"})
    EXPECT_EQ(continuations(generate(layout + " " + common)), ref) << layout;
  // Sampling: the same seed gives the same tokens on one rank and on four.
  const std::string sample = "--prompt 'The bird' --max-new-tokens 16 --temperature 1.0 --top-k 8 --seed 5";
  const std::string one = generate("--nproc 1 " + sample), four = generate("--nproc 4 --vpp 2 " + sample);
  const auto tail = [](const std::string& out) { return out.substr(out.find("The bird")); };
  EXPECT_EQ(tail(one), tail(four));
}

TEST_F(GenerateDist, BadInputIsOneLineBeforeAnyRankStarts) {
  auto expect_error = [](const std::string& args, const std::string& text) {
    const std::string out = generate(args, 2);
    EXPECT_NE(out.find(text), std::string::npos) << args << "\n" << out;
    EXPECT_EQ(out.find("[rank"), std::string::npos) << "a rank started for " << args << "\n" << out;
  };
  expect_error("--prompt 'The cat' --max-new-tokens 40",
               "--max-new-tokens 40: prompt 1 has 7 tokens and the model holds 32 positions, so at most 25 new tokens fit");
  expect_error("--prompt x --prompts " + dir_ + "/prompts.txt", "give exactly one of --prompt TEXT and --prompts FILE");
  expect_error("--prompt x --temperature -1", "--temperature must be a finite number >= 0");
  expect_error("--prompt x --nproc 9", "--layers");  // 8 layers cannot fill 9 stages
}

TEST(GenerateMhc, DecodesOnOneRankAndIsRefusedOnTwo) {
  const std::string dir = fresh_dir("generate-mhc");
  const auto t = run_command(hyperpipe() + " train --mhc --nproc 2 --schedule 1f1b --steps 2 --layers 2 --timeout 60 --save " +
                                 dir + "/ck",
                             120);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string gen = hyperpipe() + " generate --load " + dir + "/ck --prompt 'The cat' --max-new-tokens 4 --timeout 60";
  const auto one = run_command(gen + " --nproc 1");
  EXPECT_EQ(one.exit_code, 0) << one.output;
  const auto two = run_command(gen + " --nproc 2");
  EXPECT_EQ(two.exit_code, 2) << two.output;
  EXPECT_NE(two.output.find("--nproc 2 with a model of --mhc-streams 4: an mHC model decodes only with --nproc 1"),
            std::string::npos)
      << two.output;
}

}  // namespace
}  // namespace hp::testing
