// `hyperpipe generate` end to end: a model trained on the embedded corpus
// continues prompts in its grammar's characters, with the same tokens under
// every decoding layout, with and without the KV cache; a VL model captions
// held-out images and PPM files as they are drawn; mHC decodes on one rank
// only; a Hybrid model decodes (Mamba state cached) with the same tokens on
// every layout; bad input is one line before any rank starts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "data/vl_data.hpp"
#include "train/task.hpp"
#include "in_process.hpp"
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

// A suite's shared checkpoint, trained once. GoogleTest marks every test of a
// suite whose SetUpTestSuite() fails as skipped (and ctest passes skipped
// tests), so the set-up only records its result and each test's SetUp() fails
// on it: a broken `train` fails every test it would have hidden.
struct SharedTraining {
  bool done = false;
  CommandResult result;
  void expect_ok() const {
    ASSERT_TRUE(done) << "the suite's set-up did not run";
    ASSERT_EQ(result.exit_code, 0) << "the suite's training run failed:\n" << result.output;
  }
};

class GenerateDist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const SharedRun run = shared_run(
        "generate", hyperpipe() + " train --nproc 2 --steps 80 --log-interval 80 --timeout 60 --save {DIR}/ck", 300);
    dir_ = run.dir;
    training_ = {true, run.result};
    prompts_ = fresh_dir("generate") + "/prompts.txt";  // this process's own
    std::ofstream(prompts_) << kPrompts[0] << "\n" << kPrompts[1] << "\n" << kPrompts[2] << "\n";
  }
  void SetUp() override { training_.expect_ok(); }
  static std::string generate(const std::string& args, int expect_exit = 0) {
    const auto r = run_command(hyperpipe() + " generate --load " + dir_ + "/ck --timeout 60 " + args, 120);
    EXPECT_EQ(r.exit_code, expect_exit) << args << "\n" << r.output;
    return r.output;
  }
  // A refusal before any rank starts, run in this process (in_process.hpp).
  static std::string refused(const std::string& args) {
    const auto r = run_in_process("generate --load " + dir_ + "/ck --timeout 60 " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    return r.output;
  }
  static std::string dir_;  // the shared training run's (shared_run)
  static std::string prompts_;
  static SharedTraining training_;
};
std::string GenerateDist::dir_;
std::string GenerateDist::prompts_;
SharedTraining GenerateDist::training_;

TEST_F(GenerateDist, ContinuesInTheGrammarsCharactersWithTheSameTokensOnEveryLayout) {
  const std::string common = "--prompts " + prompts_ + " --max-new-tokens 12";
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
    const std::string out = refused(args);
    EXPECT_NE(out.find(text), std::string::npos) << args << "\n" << out;
    EXPECT_EQ(out.find("[rank"), std::string::npos) << "a rank started for " << args << "\n" << out;
  };
  expect_error("--prompt 'The cat' --max-new-tokens 40",
               "--max-new-tokens 40: prompt 1 has 7 tokens and the model holds 32 positions, so at most 25 new tokens fit");
  expect_error("--prompt x --prompts " + prompts_, "give exactly one of --prompt TEXT and --prompts FILE");
  expect_error("--prompt x --temperature -1", "--temperature: must be >= 0, got '-1'");
  expect_error("--prompt x --nproc 9", "--layers");  // 8 layers cannot fill 9 stages
  expect_error("--image 0", "--image: --load " + dir_ + "/ck holds a language model, which continues text; give "
               "--prompt TEXT or --prompts FILE");
}

// A VL model trained briefly on the synthetic captioned images.
class GenerateVL : public ::testing::Test {
 protected:
  static constexpr int kImageSize = 16;
  static void SetUpTestSuite() {
    const SharedRun run = shared_run("generate-vl",
                                     hyperpipe() + " train --model vl --image-size " + std::to_string(kImageSize) +
                                         " --nproc 2 --steps 100 --log-interval 100 --timeout 60 --save {DIR}/ck",
                                     300);
    dir_ = run.dir;
    training_ = {true, run.result};
  }
  void SetUp() override { training_.expect_ok(); }
  static std::string generate(const std::string& args, int expect_exit = 0) {
    const auto r = run_command(hyperpipe() + " generate --load " + dir_ + "/ck --timeout 60 " + args, 120);
    EXPECT_EQ(r.exit_code, expect_exit) << args << "\n" << r.output;
    return r.output;
  }
  // A refusal before any rank starts, run in this process (in_process.hpp).
  static std::string refused(const std::string& args) {
    const auto r = run_in_process("generate --load " + dir_ + "/ck --timeout 60 " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    return r.output;
  }
  // generate's "NAME: caption" lines, by name, for names that start with `prefix`.
  static std::vector<std::pair<std::string, std::string>> captions(const std::string& output,
                                                                   const std::string& prefix) {
    std::vector<std::pair<std::string, std::string>> out;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find(prefix), colon = line.rfind(": ");
      if (at != std::string::npos && colon != std::string::npos && colon > at)
        out.emplace_back(line.substr(at, colon - at), line.substr(colon + 2));
    }
    return out;
  }
  static std::string dir_;
  static SharedTraining training_;
};
std::string GenerateVL::dir_;
SharedTraining GenerateVL::training_;

TEST_F(GenerateVL, CaptionsHeldOutImagesAsDrawnWithTheSameWordsOnEveryLayout) {
  std::string images;
  for (int i = 0; i < 8; ++i) images += " --image " + std::to_string(i);
  const auto ref = captions(generate("--nproc 1" + images), "image ");
  ASSERT_EQ(ref.size(), 8u);
  int right = 0;
  for (const auto& [name, caption] : ref) {
    const auto drawn = name.find("(drawn: ");
    ASSERT_NE(drawn, std::string::npos) << name;
    right += name.substr(drawn + 8, name.size() - drawn - 9) == caption;
  }
  EXPECT_GE(right, 6) << "captions of held-out images after 100 steps, 8/8 when this test was written";
  for (const std::string layout : {"--nproc 2", "--nproc 1 --no-kv-cache", "--nproc 2 --no-kv-cache"})
    EXPECT_EQ(captions(generate(layout + images), "image "), ref) << layout;
}

TEST_F(GenerateVL, APpmFileIsCaptionedAsItsPixelsShow) {
  const data::VLBatch b = data::make_vl_batch(kImageSize, 4, 99, 0);  // a seed training never read
  const std::size_t pixels = kImageSize * kImageSize;
  const std::string images = fresh_dir("generate-vl-ppm");
  std::string args;
  for (int r = 0; r < b.rows; ++r) {
    const std::string path = images + "/image" + std::to_string(r) + ".ppm";
    std::ofstream out(path, std::ios::binary);
    out << "P6\n" << kImageSize << " " << kImageSize << "\n255\n";
    const float* image = b.images.data() + r * data::kVLChannels * pixels;
    for (std::size_t p = 0; p < pixels; ++p)
      for (int c = 0; c < data::kVLChannels; ++c) out.put(static_cast<char>(std::lround(std::clamp(image[c * pixels + p], 0.0f, 1.0f) * 255)));
    args += " --image " + path;
  }
  const auto got = captions(generate("--nproc 2" + args), images + "/image");
  ASSERT_EQ(got.size(), 4u);
  int right = 0;
  for (int r = 0; r < b.rows; ++r)
    right += got[r].second == data::caption_text(b.captions.data() + r * data::kVLCaptionTokens,
                                                 data::kVLCaptionTokens);
  EXPECT_GE(right, 3) << "4/4 when this test was written";
}

// --image N is held-out image N of the checkpoint's own --seed, not of the default one.
TEST(GenerateVLSeed, HeldOutImagesComeFromTheCheckpointsSeed) {
  const std::string dir = fresh_dir("generate-vl-seed");
  const auto r = run_command(hyperpipe() + " train --model vl --image-size 16 --nproc 1 --steps 1 --seed 77 --timeout 60"
                                 " --save " + dir + "/ck",
                             120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto out = run_command(hyperpipe() + " generate --load " + dir + "/ck --nproc 1 --image 0 --image 3", 120);
  ASSERT_EQ(out.exit_code, 0) << out.output;
  for (int index : {0, 3}) {
    const data::VLBatch b = data::make_vl_batch(16, 1, 77 ^ hp::train::kHeldOutSeedMix, index);
    const std::string drawn = "image " + std::to_string(index) + " (drawn: " +
                              data::caption_text(b.captions.data(), data::kVLCaptionTokens) + ")";
    EXPECT_NE(out.output.find(drawn), std::string::npos) << drawn << "\n" << out.output;
  }
}

TEST_F(GenerateVL, BadInputIsOneLineBeforeAnyRankStarts) {
  const std::string ck = "--load " + dir_ + "/ck holds a VL model";
  for (const auto& [args, text] : std::vector<std::pair<std::string, std::string>>{
           {"--prompt x", ck + ", which captions images: give --image N (a held-out synthetic image) or --image "
                               "FILE.ppm, not --prompt/--prompts"},
           {"", ck + ": give --image N (a held-out synthetic image) or --image FILE.ppm, once per image to caption"},
           {"--image " + dir_ + "/none.ppm", "--image " + dir_ + "/none.ppm: cannot open the image file"},
           {"--image 0 --max-new-tokens 40", "--max-new-tokens 40"}}) {
    const std::string out = refused(args);
    EXPECT_NE(out.find(text), std::string::npos) << args << "\n" << out;
    EXPECT_EQ(out.find("[rank"), std::string::npos) << "a rank started for " << args << "\n" << out;
  }
}

TEST(GenerateMhc, DecodesOnOneRankAndIsRefusedOnTwo) {
  const std::string dir = fresh_dir("generate-mhc");
  const auto t = run_command(hyperpipe() + " train --mhc --nproc 2 --schedule 1f1b --steps 2 --layers 2 --timeout 60 --save " +
                                 dir + "/ck",
                             120);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const std::string gen = hyperpipe() + " generate --load " + dir + "/ck --prompt 'The cat' --max-new-tokens 4 --timeout 60";
  // The prompt and what follows it (two steps of training leave any byte, some
  // printed escaped), the same tokens with the KV cache as without it.
  const auto continued = [&](const std::string& layout) {
    const auto g = run_command(gen + " " + layout);
    EXPECT_EQ(g.exit_code, 0) << layout << "\n" << g.output;
    const auto at = g.output.find("The cat");
    return at == std::string::npos ? g.output : g.output.substr(at, g.output.find('\n', at) - at);
  };
  const std::string one = continued("--nproc 1");
  EXPECT_GE(one.size(), std::string("The cat").size() + 4) << one;
  EXPECT_EQ(continued("--nproc 1 --no-kv-cache"), one);
  const auto two = run_command(gen + " --nproc 2");
  EXPECT_EQ(two.exit_code, 2) << two.output;
  EXPECT_NE(two.output.find("--nproc 2 with a model of --mhc-streams 4: an mHC model decodes only with --nproc 1"),
            std::string::npos)
      << two.output;
}

TEST(GenerateHybrid, DecodesWithTheSameTokensOnEveryLayout) {
  const std::string dir = fresh_dir("generate-hybrid");
  const auto t = run_command(hyperpipe() + " train --model hybrid --nproc 2 --steps 30 --log-interval 30 --timeout 60 "
                                 "--save " + dir + "/ck",
                             120);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  auto generate = [&](const std::string& layout) {
    const auto g = run_command(hyperpipe() + " generate --load " + dir +
                               "/ck --prompt 'The cat' --max-new-tokens 12 --timeout 60 " + layout);
    EXPECT_EQ(g.exit_code, 0) << layout << "\n" << g.output;
    const auto at = g.output.find("The cat");
    return at == std::string::npos ? g.output : g.output.substr(at, g.output.find('\n', at) - at);
  };
  const std::string ref = generate("--nproc 1");
  EXPECT_EQ(ref.size(), std::string("The cat").size() + 12) << ref;
  for (const std::string layout : {"--nproc 2", "--nproc 2 --vpp 2", "--nproc 1 --no-kv-cache"})
    EXPECT_EQ(generate(layout), ref) << layout;
}

}  // namespace
}  // namespace hp::testing
