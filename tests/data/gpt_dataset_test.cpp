#include "data/gpt_dataset.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/indexed_dataset.hpp"

namespace hp::data {
namespace {

// Documents whose tokens name their place: document d's token j is
// 100 d + j, its last the end-of-document token 100 d + 99.
std::shared_ptr<const IndexedDataset> numbered_documents(const std::string& name, const std::vector<int>& lengths) {
  const std::string prefix = ::testing::TempDir() + name;
  IndexedDatasetWriter w(prefix, TokenDtype::kInt32);
  for (std::size_t d = 0; d < lengths.size(); ++d) {
    std::vector<std::int64_t> doc;
    for (int j = 0; j + 1 < lengths[d]; ++j) doc.push_back(100 * static_cast<std::int64_t>(d) + j);
    doc.push_back(100 * static_cast<std::int64_t>(d) + 99);
    w.add_document(doc);
  }
  w.finish();
  return std::make_shared<const IndexedDataset>(prefix);
}

std::vector<std::int64_t> sample_of(const GptDataset& g, std::uint64_t seed, std::int64_t i) {
  std::vector<std::int64_t> out(g.longest_row());
  g.sample(seed, i, out.size(), out.data());
  return out;
}

bool follows(std::int64_t a, std::int64_t b) {
  if (a % 100 == 99) return b % 100 == 0 || b % 100 == 99;  // a document ends; any other begins
  return b == a + 1 || (b % 100 == 99 && b / 100 == a / 100);
}

// One epoch cuts the documents, laid end to end, into windows of seq_len + 1
// that overlap by one token and cross document boundaries.
TEST(GptDataset, AnEpochCutsTheDocumentStreamIntoOverlappingWindows) {
  const auto ds = numbered_documents("gpt_epoch", {5, 9, 3, 12, 7, 4, 8});  // 48 tokens
  const int seq_len = 6;
  const GptDataset g(ds, 0, 7, seq_len, "train");
  ASSERT_EQ(g.tokens_per_epoch(), 48);
  ASSERT_EQ(g.samples_per_epoch(), (48 - 1) / seq_len);
  std::multiset<std::int64_t> firsts, lasts;
  std::set<std::int64_t> seen;
  bool crosses = false;
  for (std::int64_t i = 0; i < g.samples_per_epoch(); ++i) {
    const auto s = sample_of(g, 3, i);
    ASSERT_EQ(s.size(), static_cast<std::size_t>(seq_len + 1));
    for (std::size_t j = 1; j < s.size(); ++j) {
      EXPECT_TRUE(follows(s[j - 1], s[j])) << "sample " << i << " token " << j;
      crosses |= s[j - 1] / 100 != s[j] / 100;
    }
    firsts.insert(s.front());
    lasts.insert(s.back());
    seen.insert(s.begin(), s.end());
  }
  EXPECT_TRUE(crosses);
  // Sample k + 1 starts where sample k ends: all but one last token is a first token.
  int shared = 0;
  for (auto t : lasts) shared += static_cast<int>(firsts.count(t));
  EXPECT_EQ(shared, g.samples_per_epoch() - 1);
  // Everything but the tail that does not fill a sample is read.
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(g.samples_per_epoch() * seq_len + 1));
}

TEST(GptDataset, OrdersAreDrawnFromTheSeedAndTheEpoch) {
  const auto ds = numbered_documents("gpt_orders", {10, 10, 10, 10, 10, 10, 10, 10});
  const GptDataset a(ds, 0, 8, 4, "train"), b(ds, 0, 8, 4, "train");
  const std::int64_t n = a.samples_per_epoch();
  std::vector<std::vector<std::int64_t>> epoch0, epoch1, other_seed;
  for (std::int64_t i = 0; i < n; ++i) {
    epoch0.push_back(sample_of(a, 1, i));
    EXPECT_EQ(epoch0.back(), sample_of(b, 1, i));
    epoch1.push_back(sample_of(a, 1, n + i));
    other_seed.push_back(sample_of(a, 2, i));
  }
  EXPECT_NE(epoch0, epoch1);
  EXPECT_NE(epoch0, other_seed);
  EXPECT_EQ(epoch0[3], sample_of(a, 1, 3));  // the cache serves the epoch asked for, not the newest
}

TEST(GptDataset, ReadsOnlyItsDocumentsAndRefusesTooFewTokens) {
  const auto ds = numbered_documents("gpt_range", {6, 6, 6, 6, 6});
  const GptDataset g(ds, 1, 3, 4, "validation");
  for (std::int64_t i = 0; i < 2 * g.samples_per_epoch(); ++i)
    for (auto t : sample_of(g, 5, i)) EXPECT_TRUE(t / 100 == 1 || t / 100 == 2) << t;
  try {
    GptDataset(ds, 4, 5, 6, "test");
    ADD_FAILURE() << "a 6-token split served seq-len 6";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("test split's 1 documents hold 6 tokens; seq-len 6 needs at least 7"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hp::data
