#include "model/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/test_util.hpp"

namespace hp::model {
namespace {

using testing::expect_invalid;

// Ranges are consecutive in stage order, cover [0, layers), and agree with
// count(), stage_of_layer() and the (rank, chunk) mapping.
void expect_consistent(const Partition& p) {
  int next = 0;
  for (int s = 0; s < p.num_stages(); ++s) {
    EXPECT_EQ(p.begin(s), next) << p.describe() << " stage " << s;
    EXPECT_GE(p.count(s), 0);
    EXPECT_EQ(p.count(s), p.counts()[s]);
    for (int l = p.begin(s); l < p.end(s); ++l) EXPECT_EQ(p.stage_of_layer(l), s);
    next = p.end(s);
    EXPECT_EQ(p.stage(p.rank_of(s), p.chunk_of(s)), s);
    EXPECT_EQ(p.is_first(s), s == 0);
    EXPECT_EQ(p.is_last(s), s == p.num_stages() - 1);
  }
  EXPECT_EQ(next, p.num_layers());
}

TEST(Partition, EvenSplitOneLayerPerStageLoopStyle) {
  const auto p = Partition::even(8, 4, 2);
  EXPECT_EQ(p.num_stages(), 8);
  EXPECT_EQ(p.counts(), std::vector<int>(8, 1));
  // stage = chunk * pp + rank
  EXPECT_EQ(p.stage(0, 0), 0);
  EXPECT_EQ(p.stage(3, 0), 3);
  EXPECT_EQ(p.stage(0, 1), 4);
  EXPECT_EQ(p.stage(3, 1), 7);
  EXPECT_EQ(p.rank_of(6), 2);
  EXPECT_EQ(p.chunk_of(6), 1);
  EXPECT_EQ(p.begin(5), 5);
  EXPECT_EQ(p.end(5), 6);
  expect_consistent(p);
}

// V placement: rank r holds stages r and 2 pp - 1 - r; the layers per stage stay.
TEST(Partition, VPlacementMapsRankRToStagesRAndTwoPPMinusOneMinusR) {
  const auto p = Partition::even(8, 4, 2, schedule::Placement::V);
  EXPECT_EQ(p.counts(), Partition::even(8, 4, 2).counts());
  EXPECT_EQ(p.stage(0, 1), 7);
  EXPECT_EQ(p.stage(3, 1), 4);
  EXPECT_EQ(p.rank_of(7), 0);
  EXPECT_EQ(p.rank_of(5), 2);
  EXPECT_EQ(p.chunk_of(5), 1);
  expect_consistent(p);
  try {
    Partition::even(12, 4, 3, schedule::Placement::V);
    ADD_FAILURE() << "V placement with three chunks per rank was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "V placement holds two chunks per rank: schedule.vpp must be 2, got 3");
  }
}

TEST(Partition, EvenSplitRemainderGoesToFirstStages) {
  const auto p = Partition::even(10, 2, 2);
  EXPECT_EQ(p.counts(), (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(p.begin(2), 6);
  EXPECT_EQ(p.end(3), 10);
  expect_consistent(p);
  const auto q = Partition::even(7, 3);
  EXPECT_EQ(q.counts(), (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(q.vpp(), 1);
  expect_consistent(q);
  for (int layers = 1; layers <= 13; ++layers) {
    for (int pp = 1; pp <= 4; ++pp) {
      for (int v = 1; v <= 3; ++v) {
        if (layers < pp * v) continue;
        const auto r = Partition::even(layers, pp, v);
        expect_consistent(r);
        int lo = layers, hi = 0;
        for (int c : r.counts()) lo = std::min(lo, c), hi = std::max(hi, c);
        EXPECT_LE(hi - lo, 1) << r.describe();
        EXPECT_GE(lo, 1) << r.describe();
      }
    }
  }
}

TEST(Partition, EvenSplitRejectsTooFewLayers) {
  expect_invalid([] { Partition::even(6, 4, 2); },
                 {"model.num_layers 6 cannot be split over 8 stages (schedule.pp 4 x schedule.vpp 2): give at least 8 "
                  "layers or per-stage counts"});
  expect_invalid([] { Partition::even(0, 1, 1); }, {"model.num_layers", "positive"});
  expect_invalid([] { Partition::even(8, 0, 1); }, {"schedule.pp", "at least 1"});
  expect_invalid([] { Partition::even(8, 2, 0); }, {"schedule.vpp", "at least 1"});
}

TEST(Partition, ExplicitCountsAllowEmptyStages) {
  const auto p = Partition::from_counts(8, 2, 2, {0, 3, 5, 0});
  EXPECT_EQ(p.count(0), 0);
  EXPECT_EQ(p.begin(0), 0);
  EXPECT_EQ(p.end(0), 0);
  EXPECT_TRUE(p.is_first(0));  // still holds the embedding
  EXPECT_EQ(p.begin(1), 0);
  EXPECT_EQ(p.end(1), 3);
  EXPECT_EQ(p.begin(3), 8);
  EXPECT_EQ(p.end(3), 8);
  EXPECT_TRUE(p.is_last(3));
  EXPECT_EQ(p.stage_of_layer(0), 1);
  EXPECT_EQ(p.stage_of_layer(3), 2);
  EXPECT_EQ(p.stage_of_layer(7), 2);
  expect_consistent(p);
  // Explicit counts equal to the even split give an equal partition.
  EXPECT_EQ(Partition::from_counts(10, 2, 2, {3, 3, 2, 2}), Partition::even(10, 2, 2));
  EXPECT_NE(Partition::from_counts(10, 2, 2, {2, 3, 3, 2}), Partition::even(10, 2, 2));
  EXPECT_EQ(p.describe(), "pp=2 vpp=2 layers=[0,3,5,0]");
}

TEST(Partition, ExplicitCountsErrors) {
  expect_invalid([] { Partition::from_counts(8, 2, 2, {4, 4}); },
                 {"model.layers_per_stage has 2 counts", "4 stages (schedule.pp 2 x schedule.vpp 2)"});
  expect_invalid([] { Partition::from_counts(8, 2, 2, {4, 4, -1, 1}); },
                 {"model.layers_per_stage", "stage 2", ">= 0"});
  expect_invalid([] { Partition::from_counts(8, 2, 2, {2, 2, 2, 1}); },
                 {"model.layers_per_stage sums to 7", "model.num_layers is 8"});
  expect_invalid([] { Partition::from_counts(0, 1, 1, {0}); }, {"model.num_layers", "positive"});
}

TEST(Partition, QueriesRejectOutOfRange) {
  const auto p = Partition::even(8, 2, 2);
  expect_invalid([&] { p.begin(4); }, {"stage 4", "4 stages"});
  expect_invalid([&] { p.is_last(-1); }, {"stage -1"});
  expect_invalid([&] { p.stage(2, 0); }, {"rank 2", "schedule.pp 2"});
  expect_invalid([&] { p.stage(0, 2); }, {"chunk 2", "schedule.vpp 2"});
  expect_invalid([&] { p.stage_of_layer(8); }, {"layer 8", "model.num_layers is 8"});
}

}  // namespace
}  // namespace hp::model
