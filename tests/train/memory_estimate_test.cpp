// The memory estimate that refuses a model too large for the machine before
// any rank starts (train/memory_estimate.hpp).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "train/gpt_task.hpp"
#include "train/memory_estimate.hpp"

namespace hp::train {
namespace {

TEST(MemoryEstimate, CountsTheGptParametersOfTheLargestRankExactly) {
  GptTaskOptions o;
  o.model.num_layers = 4;
  o.model.hidden_size = 32;
  o.model.num_attention_heads = 2;
  o.model.max_seq_len = 16;
  o.data.seq_len = 16;
  const GptTask task(o);
  for (int pp : {1, 2}) {
    schedule::ScheduleOptions layout;
    layout.kind = pp == 1 ? schedule::ScheduleKind::NoPipelining : schedule::ScheduleKind::OneFOneB;
    layout.pp = pp;
    layout.micro_batches = 4;
    const auto estimate = task.memory_estimate(layout);
    ASSERT_TRUE(estimate.has_value());
    std::int64_t largest = 0;
    for (int r = 0; r < pp; ++r) {
      std::int64_t n = 0;
      for (const auto& st : task.build(layout, r, {}).stages)
        for (const auto& [name, p] : st.parameters) n += p.numel();
      largest = std::max(largest, n);
    }
    EXPECT_DOUBLE_EQ(estimate->parameters, 4.0 * static_cast<double>(largest)) << "pp " << pp;  // float32
    EXPECT_DOUBLE_EQ(estimate->optimizer, 2 * estimate->parameters);
    EXPECT_GT(estimate->activations, 0);
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
