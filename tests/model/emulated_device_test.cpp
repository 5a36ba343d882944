#include "model/emulated_device.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <chrono>

#include "model/layers.hpp"
#include "model/transformer_config.hpp"

namespace hp::model {
namespace {

double ms_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The delay's values and gradient are the identity's; its forward and
// backward last at least the emulated times (a sleep: the core is free).
TEST(EmulatedDevice, ADelayIsTheIdentityThatTakesItsTime) {
  at::manual_seed(105);  // a failure reproduces
  const at::Tensor x = at::randn({4, 3}, at::kDouble).requires_grad_(true);
  at::Tensor y;
  EXPECT_GE(ms_of([&] { y = emulated_delay(x, 20, 40); }), 20);
  EXPECT_TRUE(y.equal(x));
  EXPECT_NE(y.data_ptr(), x.data_ptr());  // a new tensor, never a view
  const at::Tensor g = at::randn({4, 3}, at::kDouble);
  EXPECT_GE(ms_of([&] { torch::autograd::backward({y}, {g}); }), 40);
  EXPECT_TRUE(x.grad().equal(g));
}

TEST(EmulatedDevice, AnEmulatedOnlyBlockHasNoParametersAndKeepsTheActivationShape) {
  at::manual_seed(106);  // a failure reproduces
  TransformerConfig c;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.emulate.forward_ms = 1;
  c.emulate.replace_math = true;
  TransformerBlock block(c);
  EXPECT_TRUE(block.parameters().empty());
  const at::Tensor x = at::randn({2, 5, 16});
  EXPECT_TRUE(block.forward(x).equal(x));
  // On top of the math: the same parameters and values as without emulation.
  c.emulate.replace_math = false;
  TransformerConfig plain = c;
  plain.emulate = {};
  TransformerBlock timed(c), untimed(plain);
  EXPECT_EQ(timed.parameters().size(), untimed.parameters().size());
  EXPECT_TRUE(timed.forward(x).equal(untimed.forward(x))) << "the emulated time must not touch the math";
  c.emulate.backward_ms = -1;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

}  // namespace
}  // namespace hp::model
