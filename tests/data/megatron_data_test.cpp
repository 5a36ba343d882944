#include "data/megatron_data.hpp"

#include <gtest/gtest.h>

#include "data/indexed_dataset.hpp"

namespace hp::data {
namespace {

using Bounds = std::array<std::size_t, 4>;

// Expected values worked by hand from Megatron's get_split_indices:
// round(w x n) (Python rounds half to even), surplus taken from every end.
TEST(SplitDocuments, FollowsMegatronsGetSplitIndices) {
  EXPECT_EQ(split_documents("969,30,1", 1000), (Bounds{0, 969, 999, 1000}));
  EXPECT_EQ(split_documents("", 1000), (Bounds{0, 969, 999, 1000}));
  EXPECT_EQ(split_documents("969,30,1", 100), (Bounds{0, 97, 100, 100}));
  EXPECT_EQ(split_documents("8,1,1", 10), (Bounds{0, 8, 9, 10}));
  EXPECT_EQ(split_documents("1,1,1", 10), (Bounds{0, 4, 7, 10}));  // 3 + 3 + 3, one short
  EXPECT_EQ(split_documents("1,1", 5), (Bounds{0, 3, 5, 5}));      // round(2.5) = 2, twice
  EXPECT_EQ(split_documents("98/2", 50), (Bounds{0, 49, 50, 50}));
}

TEST(SplitDocuments, RefusesABadSplitNamingTheFlag) {
  for (const char* bad : {"a,b", "1,2,3,4", "0,0,0", "-1,2", "1,,2"}) {
    try {
      split_documents(bad, 10);
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("data.split ") + bad, 0), 0u) << e.what();
    }
  }
}

std::string documents_prefix(const char* name, int documents, int length) {
  const std::string prefix = ::testing::TempDir() + name;
  IndexedDatasetWriter w(prefix, TokenDtype::kUint16);
  for (int d = 0; d < documents; ++d) w.add_document(std::vector<std::int64_t>(length, d));
  w.finish();
  return prefix;
}

TEST(OpenMegatronData, SplitsEachDatasetAndBlendsEachPartAlike) {
  const std::string a = documents_prefix("blend_a", 10, 9), b = documents_prefix("blend_b", 20, 9);
  EXPECT_TRUE(is_megatron_data(a));
  EXPECT_TRUE(is_megatron_data("0.5 " + a + " 0.5 " + b));
  EXPECT_FALSE(is_megatron_data(a + ".bin"));
  const auto parts = open_megatron_data("3 " + a + " 1 " + b, "8,2,0", 8);
  ASSERT_TRUE(parts[0] && parts[1]);
  EXPECT_FALSE(parts[2]);
  // A's train documents are 0..7, B's 0..15; its validation parts the rest.
  std::vector<std::int64_t> row(9);
  for (std::int64_t i = 0; i < 200; ++i) {
    parts[0]->sample(1, i, row.size(), row.data());
    EXPECT_LT(row[0], 16);
    parts[1]->sample(1, i, row.size(), row.data());
    EXPECT_GE(row[0], 8);
  }
  const auto one = open_megatron_data(a, "", 8);
  EXPECT_TRUE(one[0] && !one[1] && !one[2]);  // 969,30,1 of ten documents: all train
}

TEST(OpenMegatronData, RefusesABadBlendOrSplitInOneLine) {
  const std::string a = documents_prefix("refuse_a", 4, 9);
  auto message = [](const std::string& spec, const std::string& split) -> std::string {
    try {
      open_megatron_data(spec, split, 8);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(message("0.5 " + a + " 0.5", "").find("3 words; a blend is \"WEIGHT PREFIX"), std::string::npos);
  EXPECT_NE(message("x " + a + " 1 " + a, "").find("\"x\" is not a weight"), std::string::npos);
  EXPECT_NE(message("1 " + a + " 1 /nowhere/data", "").find("data.data /nowhere/data: no indexed dataset there"),
            std::string::npos);
  EXPECT_NE(message(a, "0,1,0").find("data.split 0,1,0 leaves no training documents"), std::string::npos);
}

}  // namespace
}  // namespace hp::data
