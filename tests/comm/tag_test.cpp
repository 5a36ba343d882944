#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include "comm/p2p.hpp"

using namespace hp::comm;

namespace {

const MessageKind kAllKinds[] = {MessageKind::Activation, MessageKind::Gradient,  MessageKind::MPipeFeature,
                                 MessageKind::MPipeInput, MessageKind::MPipeGrad, MessageKind::Meta};

std::vector<int> sample(int limit, int edge) {
  std::vector<int> v;
  for (int i = 0; i < edge && i < limit; ++i) v.push_back(i);
  for (int i = std::max(edge, limit - edge); i < limit; ++i) v.push_back(i);
  for (int i = edge; i < limit - edge; i += 997) v.push_back(i);  // some from the middle
  return v;
}

}  // namespace

TEST(MakeTag, UniqueNonNegativeAndRoundTripsOverAGrid) {
  std::unordered_set<int> seen;
  const auto stages = sample(kTagMaxStages, 40);
  const auto micros = sample(kTagMaxMicros, 200);
  std::size_t count = 0;
  for (MessageKind k : kAllKinds) {
    for (int s : stages) {
      for (int m : micros) {
        int tag = make_tag(k, s, m);
        ASSERT_GE(tag, 0);
        ASSERT_TRUE(seen.insert(tag).second) << "duplicate tag " << tag << " for " << describe_tag(tag);
        TagInfo t = decode_tag(tag);
        ASSERT_EQ(t.kind, k);
        ASSERT_EQ(t.stage, s);
        ASSERT_EQ(t.micro, m);
        ASSERT_FALSE(t.is_meta);
        ++count;
      }
    }
  }
  EXPECT_EQ(seen.size(), count);
  // The largest tag still fits a non-negative int32.
  EXPECT_EQ(make_tag(MessageKind::Meta, kTagMaxStages - 1, kTagMaxMicros - 1), 6 * (1 << 28) - 1);
}

TEST(MakeTag, MetaTagsAreDistinctFromDataTagsAndFromEachOther) {
  std::unordered_set<int> data;
  std::unordered_set<int> meta;
  const auto stages = sample(kMetaTagMaxStages, 40);
  const auto micros = sample(kTagMaxMicros, 100);
  for (MessageKind k : kAllKinds) {
    for (int s : stages) {
      for (int m : micros) data.insert(make_tag(k, s, m));
    }
  }
  for (MessageKind k : kAllKinds) {
    if (k == MessageKind::Meta) continue;
    for (int s : stages) {
      for (int m : micros) {
        int tag = make_tag(k, s, m);
        int mt = meta_tag(tag);
        ASSERT_GE(mt, 0);
        ASSERT_EQ(data.count(mt), 0u) << describe_tag(mt);
        ASSERT_TRUE(meta.insert(mt).second) << "duplicate meta tag for " << describe_tag(tag);
        TagInfo t = decode_tag(mt);
        ASSERT_TRUE(t.is_meta);
        ASSERT_EQ(t.kind, k);
        ASSERT_EQ(t.stage, s);
        ASSERT_EQ(t.micro, m);
      }
    }
  }
  // Largest meta tag fits int32.
  int top = meta_tag(make_tag(MessageKind::MPipeGrad, kMetaTagMaxStages - 1, kTagMaxMicros - 1));
  EXPECT_GT(top, 0);
  EXPECT_LE(static_cast<long long>(top), static_cast<long long>(INT_MAX));
}

TEST(MakeTag, ActivationAndGradientOfTheSameStageAndMicroDiffer) {
  // The PP=2 hazard: rank 1 sends stage 1's activation (to stage 2 on rank 0)
  // and stage 1's input gradient (to stage 0 on rank 0) for the same micro.
  EXPECT_NE(make_tag(MessageKind::Activation, 1, 3), make_tag(MessageKind::Gradient, 1, 3));
  EXPECT_NE(meta_tag(make_tag(MessageKind::Activation, 1, 3)), meta_tag(make_tag(MessageKind::Gradient, 1, 3)));
}

TEST(MakeTag, RejectsOutOfRangeWithAMessage) {
  try {
    make_tag(MessageKind::Activation, kTagMaxStages, 0);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("stage 4096 must be in [0, 4096)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_tag(MessageKind::Activation, -1, 0), std::invalid_argument);
  EXPECT_THROW(make_tag(MessageKind::Gradient, 0, kTagMaxMicros), std::invalid_argument);
  EXPECT_THROW(make_tag(MessageKind::Gradient, 0, -1), std::invalid_argument);
  EXPECT_THROW(make_tag(static_cast<MessageKind>(9), 0, 0), std::invalid_argument);
  EXPECT_THROW(meta_tag(make_tag(MessageKind::Meta, 0, 0)), std::invalid_argument);
  EXPECT_THROW(meta_tag(meta_tag(make_tag(MessageKind::Activation, 0, 0))), std::invalid_argument);
  EXPECT_THROW(meta_tag(make_tag(MessageKind::Activation, kMetaTagMaxStages, 0)), std::invalid_argument);
  EXPECT_THROW(decode_tag(-5), std::invalid_argument);
  EXPECT_THROW(decode_tag(INT_MAX), std::invalid_argument);  // in the meta range but no kind
}

TEST(MakeTag, DescribesTags) {
  EXPECT_EQ(describe_tag(make_tag(MessageKind::Gradient, 1, 7)), "Gradient(stage 1, micro 7)");
  EXPECT_EQ(describe_tag(meta_tag(make_tag(MessageKind::MPipeFeature, 0, 2))), "meta of MPipeFeature(stage 0, micro 2)");
  EXPECT_EQ(describe_tag(INT_MAX), "tag " + std::to_string(INT_MAX));
}

TEST(MakeTag, ForwardKinds) {
  EXPECT_TRUE(is_forward_kind(MessageKind::Activation));
  EXPECT_TRUE(is_forward_kind(MessageKind::MPipeFeature));
  EXPECT_TRUE(is_forward_kind(MessageKind::MPipeInput));
  EXPECT_TRUE(is_forward_kind(MessageKind::Meta));
  EXPECT_FALSE(is_forward_kind(MessageKind::Gradient));
  EXPECT_FALSE(is_forward_kind(MessageKind::MPipeGrad));
}
