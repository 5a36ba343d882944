// The memory estimate that refuses a model too large for the machine before
// any rank starts (train/memory_estimate.hpp).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "train/gpt_task.hpp"
#include "train/hybrid_task.hpp"
#include "train/memory_estimate.hpp"
#include "train/vl_task.hpp"

namespace hp::train {
namespace {

// The largest rank's parameter elements, counted on the built model
// (MPipe's preprocess replica included on every rank).
std::int64_t largest_rank_parameters(const Task& task, const schedule::ScheduleOptions& layout) {
  std::int64_t largest = 0;
  for (int r = 0; r < layout.pp; ++r) {
    const runtime::RankModel m = task.build(layout, r, {});
    std::int64_t n = 0;
    for (const auto& st : m.stages)
      for (const auto& [name, p] : st.parameters) n += p.numel();
    if (m.preprocess)
      for (const auto& [name, p] : m.preprocess->parameters) n += p.numel();
    largest = std::max(largest, n);
  }
  return largest;
}

schedule::ScheduleOptions layout_of(schedule::ScheduleKind kind, int pp, int vpp = 1) {
  schedule::ScheduleOptions layout;
  layout.kind = kind;
  layout.pp = pp;
  layout.vpp = vpp;
  layout.micro_batches = 4;
  return layout;
}

TEST(MemoryEstimate, CountsTheGptParametersOfTheLargestRankExactly) {
  GptTaskOptions o;
  o.model.num_layers = 4;
  o.model.hidden_size = 32;
  o.model.num_attention_heads = 2;
  o.model.max_seq_len = 16;
  o.data.seq_len = 16;
  const GptTask task(o);
  for (const auto& layout : {layout_of(schedule::ScheduleKind::NoPipelining, 1),
                             layout_of(schedule::ScheduleKind::OneFOneB, 2)}) {
    const auto estimate = task.memory_estimate(layout);
    ASSERT_TRUE(estimate.has_value());
    EXPECT_DOUBLE_EQ(estimate->parameters, 4.0 * largest_rank_parameters(task, layout)) << "pp " << layout.pp;  // float32
    EXPECT_DOUBLE_EQ(estimate->optimizer, 2 * estimate->parameters);
    EXPECT_GT(estimate->activations, 0);
  }
}

TEST(MemoryEstimate, CountsTheHybridParametersOfEveryLayerKindMtpAndMhcExactly) {
  for (const bool mhc : {false, true}) {
    HybridTaskOptions o;
    o.model.base.hidden_size = 16;
    o.model.base.num_attention_heads = 2;
    o.model.base.max_seq_len = 16;
    o.model.base.enable_mhc_connections = mhc;
    o.model.base.mhc_num_residual_streams = 2;
    o.model.pattern = "M*|-E/*-";
    o.data.seq_len = 16;
    const HybridTask task(o);
    for (const auto& layout : {layout_of(schedule::ScheduleKind::NoPipelining, 1),
                               layout_of(schedule::ScheduleKind::OneFOneB, 2)}) {
      const auto estimate = task.memory_estimate(layout);
      ASSERT_TRUE(estimate.has_value());
      EXPECT_DOUBLE_EQ(estimate->parameters, 4.0 * largest_rank_parameters(task, layout))
          << "mhc " << mhc << " pp " << layout.pp;
      EXPECT_GT(estimate->activations, 0);
      EXPECT_NE(estimate->sized_by.find("model.moe_num_experts"), std::string::npos);
    }
  }
}

TEST(MemoryEstimate, CountsTheVlTowerWhereTheLayoutPutsItExactly) {
  VlTaskOptions o;
  o.text.hidden_size = 16;
  o.text.num_attention_heads = 2;
  o.text.num_layers = 4;
  o.vision.num_layers = 2;
  const VlTask task(o);
  auto mpipe = [](int t) {
    schedule::ScheduleOptions l = layout_of(schedule::ScheduleKind::MPipe, 2, 2);
    l.mpipe.transpose_layers = t;
    return l;
  };
  for (const auto& layout : {layout_of(schedule::ScheduleKind::NoPipelining, 1),
                             layout_of(schedule::ScheduleKind::OneFOneB, 2), mpipe(1), mpipe(2)}) {
    const auto estimate = task.memory_estimate(layout);
    ASSERT_TRUE(estimate.has_value());
    EXPECT_DOUBLE_EQ(estimate->parameters, 4.0 * largest_rank_parameters(task, layout))
        << schedule::kind_name(layout.kind) << " pp " << layout.pp << " T " << layout.mpipe.transpose_layers;
    EXPECT_NE(estimate->sized_by.find("vision.num_layers"), std::string::npos);
  }
}

TEST(MemoryEstimate, ARefusalSaysWhatIsNeededAndWhatTheMachineHas) {
  MemoryEstimate e;
  e.parameters = e.gradients = 1.0 * (1 << 30);
  e.optimizer = 2.0 * (1 << 30);
  EXPECT_NO_THROW(check_memory_fits(e, 2, 9.0 * (1 << 30)));
  try {
    check_memory_fits(e, 4, 9.0 * (1 << 30));
    FAIL() << "16 GiB do not fit in 9";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("about 4.00 GiB per rank (parameters 1.00, gradients 1.00, optimizer 2.00, "
                                           "activations 0.00 GiB), 16 GiB for the 4 rank(s) on this machine, which has "
                                           "9.00 GiB available"),
              std::string::npos)
        << err.what();
  }
  const auto available = available_memory_bytes();
  ASSERT_TRUE(available.has_value());
  EXPECT_GT(*available, 0);
}

}  // namespace
}  // namespace hp::train
