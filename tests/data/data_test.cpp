#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "data/batch_sampler.hpp"
#include "data/token_source.hpp"

namespace hp::data {
namespace {

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

TEST(EmbeddedCorpus, DeterministicPrintableAndRepetitive) {
  auto a = embedded_corpus(4096, 7);
  auto b = embedded_corpus(4096, 7);
  auto c = embedded_corpus(4096, 8);
  ASSERT_EQ(a->size(), 4096u);
  bool differs = false;
  std::map<std::int64_t, int> counts;
  for (std::size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ(a->at(i), b->at(i));
    differs |= a->at(i) != c->at(i);
    EXPECT_GE(a->at(i), 32);
    EXPECT_LT(a->at(i), 127);
    counts[a->at(i)]++;
  }
  EXPECT_TRUE(differs);
  // A small alphabet: unigram entropy well below a uniform byte distribution (8 bits).
  double h = 0;
  for (auto& [tok, n] : counts) h -= n / 4096.0 * std::log2(n / 4096.0);
  EXPECT_LT(h, 4.6);
  EXPECT_EQ(a->vocab_size(), 256);
}

TEST(TokenFile, ReadsUint16AndUint32ThroughMmap) {
  const std::string p16 = temp_path("tokens.u16"), p32 = temp_path("tokens.u32");
  {
    std::ofstream f(p16, std::ios::binary);
    for (std::uint16_t v : {1, 500, 65535}) f.write(reinterpret_cast<const char*>(&v), 2);
    std::ofstream g(p32, std::ios::binary);
    for (std::uint32_t v : {3u, 70000u, 9u}) g.write(reinterpret_cast<const char*>(&v), 4);
  }
  auto s16 = open_source(p16);
  ASSERT_EQ(s16->size(), 3u);
  EXPECT_EQ(s16->at(1), 500);
  EXPECT_EQ(s16->at(2), 65535);
  EXPECT_EQ(s16->vocab_size(), 65536);
  auto s32 = open_source("u32:" + p32 + ":80000");
  EXPECT_EQ(s32->at(1), 70000);
  EXPECT_EQ(s32->vocab_size(), 80000);
}

TEST(TokenFile, RejectsBadFilesWithTheirName) {
  const std::string odd = temp_path("odd.u32");
  {
    std::ofstream f(odd, std::ios::binary);
    f << "abc";
  }
  try {
    open_source(odd);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("odd.u32"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("multiple of 4"), std::string::npos);
  }
  // Each refusal names the flag, the file and what is wrong with it.
  const auto refusal = [](const std::string& spec) {
    try {
      open_source(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal(temp_path("missing.txt")), "data.data " + temp_path("missing.txt") + ": cannot open the text file");
  EXPECT_EQ(refusal("weird.xyz"), "data.data weird.xyz: unknown data spec; use embedded, text:PATH, u16:PATH[:VOCAB], "
                                  "u32:PATH[:VOCAB] or a path ending in .txt, .u16, .bin or .u32");
}

TEST(TextFile, OneByteOneToken) {
  const std::string p = temp_path("t.txt");
  {
    std::ofstream f(p);
    f << "hello";
  }
  auto s = open_source(p);
  ASSERT_EQ(s->size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(s->at(i), "hello"[i]) << "byte " << i;
}

TEST(BatchSampler, DependsOnlyOnSeedAndStep) {
  auto src = embedded_corpus(10000, 0);
  BatchOptions o{4, 16, 99};
  auto b1 = sample_batch(*src, o, 3), b2 = sample_batch(*src, o, 3), b3 = sample_batch(*src, o, 4);
  EXPECT_EQ(b1.tokens, b2.tokens);
  EXPECT_NE(b1.tokens, b3.tokens);
  ASSERT_EQ(b1.tokens.size(), 4u * 17u);
  // Each row is seq_len + 1 consecutive tokens of the source (inputs and the
  // labels one ahead come from one window), not four copies of one window.
  std::set<std::size_t> starts;
  for (std::size_t r = 0; r < 4; ++r) {
    const auto row = b1.tokens.begin() + static_cast<std::ptrdiff_t>(r * 17);
    const auto window_at = [&](std::size_t s) {
      for (std::size_t j = 0; j < 17; ++j)
        if (row[static_cast<std::ptrdiff_t>(j)] != src->at(s + j)) return false;
      return true;
    };
    std::size_t found = src->size();
    for (std::size_t s = 0; s + 17 <= src->size() && found == src->size(); ++s)
      if (window_at(s)) found = s;
    ASSERT_LT(found, src->size()) << "row " << r << " is not a window of the source";
    starts.insert(found);
  }
  EXPECT_GT(starts.size(), 1u);
  o.seq_len = 20000;
  EXPECT_THROW(sample_batch(*src, o, 0), std::invalid_argument);
}

}  // namespace
}  // namespace hp::data

TEST(BatchSampler, ReadsOnlyTheFlaggedRowsAndTheSameTokensInThem) {
  const auto src = hp::data::embedded_corpus(10000, 0);
  hp::data::BatchOptions o;
  o.batch_size = 4;
  o.seq_len = 8;
  const auto all = hp::data::sample_batch(*src, o, 3);
  const std::vector<bool> rows = {false, true, false, true};
  const auto some = hp::data::sample_batch(*src, o, 3, &rows);
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 9; ++j) {
      const auto got = some.tokens[static_cast<size_t>(r * 9 + j)];
      EXPECT_EQ(got, rows[r] ? all.tokens[static_cast<size_t>(r * 9 + j)] : 0) << "row " << r << " token " << j;
    }
  EXPECT_NE(all.tokens, some.tokens);
  const std::vector<bool> wrong = {true};
  EXPECT_THROW(hp::data::sample_batch(*src, o, 3, &wrong), std::invalid_argument);
}
