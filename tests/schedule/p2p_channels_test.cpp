#include "schedule/p2p_channels.hpp"

#include <gtest/gtest.h>

#include <random>
#include <utility>
#include <vector>

namespace hp::schedule {
namespace {

// The same pairs get the same ids in order of first use, whether the index
// keeps a table (small pp) or a hash map (large pp).
void check_ids(int pp) {
  ChannelIndex index(pp);
  std::mt19937 rng(static_cast<unsigned>(pp));
  std::vector<std::pair<int, int>> seen;
  for (int i = 0; i < 2000; ++i) {
    // Few distinct senders so pairs repeat.
    const int from = static_cast<int>(rng() % 6) * (pp / 6), to = static_cast<int>(rng() % pp);
    int want = -1;
    for (size_t k = 0; k < seen.size(); ++k)
      if (seen[k] == std::make_pair(from, to)) want = static_cast<int>(k);
    if (want < 0) {
      want = static_cast<int>(seen.size());
      seen.push_back({from, to});
    }
    ASSERT_EQ(index.id(from, to), want) << "pp " << pp << ": " << from << " -> " << to;
  }
  ASSERT_EQ(index.size(), static_cast<int>(seen.size()));
  for (int k = 0; k < index.size(); ++k) {
    EXPECT_EQ(index.from(k), seen[k].first);
    EXPECT_EQ(index.to(k), seen[k].second);
  }
}

TEST(ChannelIndex, IdsInOrderOfFirstUseWithATable) { check_ids(12); }

TEST(ChannelIndex, IdsInOrderOfFirstUseWithAHashMap) { check_ids(5000); }

TEST(ChannelIndex, DirectionMatters) {
  ChannelIndex index(4);
  const int ab = index.id(1, 2);
  EXPECT_NE(index.id(2, 1), ab);
  EXPECT_EQ(index.id(1, 2), ab);
}

}  // namespace
}  // namespace hp::schedule
