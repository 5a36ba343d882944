// The mesh layout (comm/mesh.hpp): Megatron's order, tp fastest, then cp,
// dp, pp; a dimension's group varies only that coordinate.
#include <gtest/gtest.h>

#include <algorithm>

#include "comm/mesh.hpp"

using namespace hp::comm;

TEST(MeshLayout, RanksFollowMegatronsOrder) {
  MeshShape s;
  s.tp = 2, s.cp = 1, s.dp = 2, s.pp = 2;
  EXPECT_EQ(s.world(), 8);
  const MeshCoord c = mesh_coord(s, 5);  // 5 = 1 + 2 * (0 + 1 * (0 + 2 * 1))
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 0);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 1);
  for (int r = 0; r < s.world(); ++r) EXPECT_EQ(mesh_rank(s, mesh_coord(s, r)), r);
  EXPECT_EQ(mesh_group_ranks(s, 5, MeshDim::TP), (std::vector<int>{4, 5}));
  EXPECT_EQ(mesh_group_ranks(s, 5, MeshDim::DP), (std::vector<int>{5, 7}));
  EXPECT_EQ(mesh_group_ranks(s, 5, MeshDim::PP), (std::vector<int>{1, 5}));
  EXPECT_EQ(mesh_group_ranks(s, 5, MeshDim::CP), (std::vector<int>{5}));
  EXPECT_THROW(mesh_coord(s, 8), std::invalid_argument);
}

TEST(MeshLayout, EveryRankIsInExactlyOneGroupOfEachDimension) {
  MeshShape s;
  s.tp = 2, s.cp = 3, s.dp = 2, s.pp = 2;
  for (MeshDim d : {MeshDim::TP, MeshDim::CP, MeshDim::DP, MeshDim::PP}) {
    std::vector<int> seen(s.world(), 0);
    for (int r = 0; r < s.world(); ++r) {
      const auto g = mesh_group_ranks(s, r, d);
      EXPECT_EQ(static_cast<int>(g.size()), s.size(d));
      EXPECT_NE(std::find(g.begin(), g.end(), r), g.end());
      if (g.front() == r)
        for (int x : g) ++seen[x];
    }
    for (int r = 0; r < s.world(); ++r) EXPECT_EQ(seen[r], 1) << mesh_dim_name(d) << " rank " << r;
    EXPECT_EQ(static_cast<int>(describe_mesh_groups(s, d).size()), s.world() / s.size(d));
  }
}

TEST(MeshLayout, Describe) {
  MeshShape s;
  s.dp = 2, s.pp = 2;
  EXPECT_EQ(describe_mesh(s), "tp 1 x cp 1 x dp 2 x pp 2 = 4 ranks");
  EXPECT_EQ(describe_mesh_groups(s, MeshDim::DP), (std::vector<std::string>{"dp group 0: ranks 0 1", "dp group 1: ranks 2 3"}));
  EXPECT_EQ(describe_mesh_groups(s, MeshDim::PP), (std::vector<std::string>{"pp group 0: ranks 0 2", "pp group 1: ranks 1 3"}));
}
