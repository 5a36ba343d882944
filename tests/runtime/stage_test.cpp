// Stage: one global stage's per-step state (runtime/stage.hpp), without any
// executor or process group.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "runtime/stage.hpp"

namespace hp::runtime {
namespace {

// y = tanh(x W): W [3, 2], a leaf whose gradient the tests read.
struct Linear {
  at::Tensor w = at::linspace(-1, 1, 6, at::kDouble).view({3, 2}).requires_grad_(true);
  Stage::Forward forward() {
    return [w = w](const at::Tensor& x, const MicroBatch&) { return at::tanh(at::matmul(x, w)); };
  }
};

at::Tensor input() { return at::arange(6, at::kDouble).view({2, 3}) / 6; }

// d sum(tanh(x W)) / dW = x^T (1 - tanh(x W)^2), written out.
at::Tensor sum_loss_weight_grad(const Linear& lin) {
  const at::Tensor x = input(), y = at::tanh(at::matmul(x, lin.w.detach()));
  return at::matmul(x.t(), 1 - y * y);
}

TEST(Stage, AFloatingInputBecomesALeafAndGetsTheGradientOfTheOutput) {
  Linear lin;
  Stage st(1, /*last=*/false, lin.forward());
  const at::Tensor x = input();
  const at::Tensor out = st.forward(0, MicroBatch{}, x);
  EXPECT_TRUE(st.input(0).requires_grad());
  EXPECT_FALSE(x.requires_grad());  // the caller's buffer is untouched
  const at::Tensor g = at::ones_like(out);
  st.backward(0, g);
  // The same computation by hand.
  const at::Tensor xr = x.clone().requires_grad_(true);
  const at::Tensor wr = lin.w.detach().clone().requires_grad_(true);
  torch::autograd::backward({at::tanh(at::matmul(xr, wr))}, {g});
  EXPECT_TRUE(st.take_input_grad(0).allclose(xr.grad(), 1e-10, 0));
  EXPECT_TRUE(lin.w.grad().allclose(wr.grad(), 1e-10, 0));
  EXPECT_THROW(st.output(0), std::logic_error);  // released by the backward
}

TEST(Stage, TheLastStageBackpropagatesItsLoss) {
  Linear lin;
  Stage st(0, /*last=*/true, lin.forward());
  const at::Tensor out = st.forward(0, MicroBatch{}, input());
  st.set_loss(0, out.sum());
  st.backward(0);
  ASSERT_TRUE(lin.w.grad().defined());
  EXPECT_TRUE(lin.w.grad().allclose(sum_loss_weight_grad(lin), 1e-10, 0)) << lin.w.grad();
}

TEST(Stage, MisuseIsRefusedWithTheStageAndMicroNamed) {
  Linear lin;
  Stage st(2, false, lin.forward());
  st.forward(3, MicroBatch{}, input());
  try {
    st.forward(3, MicroBatch{}, input());
    ADD_FAILURE() << "a second forward of micro 3 was accepted";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("stage 2: forward of micro 3 ran twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(st.backward(3), std::logic_error);      // a middle stage needs the output gradient
  EXPECT_THROW(st.take_input_grad(5), std::logic_error);    // no such micro
  Stage none(0, false, [](const at::Tensor&, const MicroBatch&) { return at::Tensor(); });
  EXPECT_THROW(none.forward(0, MicroBatch{}, input()), std::logic_error);
}

TEST(Stage, PseudoDeallocationFreesTheOutputAndKeepsTheGraph) {
  Linear a, b;
  Stage kept(1, false, a.forward()), freed(1, false, b.forward());
  kept.forward(0, MicroBatch{}, input());
  freed.forward(0, MicroBatch{}, input());
  freed.pseudo_deallocate(0);
  EXPECT_EQ(freed.output(0).numel(), 1);
  const at::Tensor g = at::full({2, 2}, 0.5, at::kDouble);
  kept.backward(0, g);
  freed.backward(0, g);
  EXPECT_TRUE(a.w.grad().equal(b.w.grad()));
  EXPECT_TRUE(kept.take_input_grad(0).equal(freed.take_input_grad(0)));
}

TEST(Stage, WithoutInputGradientTheInputStaysData) {
  Linear lin;
  Stage st(0, true, lin.forward());
  st.set_input_requires_grad(false);
  const at::Tensor out = st.forward(0, MicroBatch{}, input());
  st.set_loss(0, out.sum());
  st.backward(0);
  EXPECT_THROW(st.take_input_grad(0), std::logic_error);
  ASSERT_TRUE(lin.w.grad().defined());
  EXPECT_TRUE(lin.w.grad().allclose(sum_loss_weight_grad(lin), 1e-10, 0)) << lin.w.grad();
}

// The split backward: backward_input runs the backward inside a deferral
// scope (what a layer hands defer_weight_grad waits) and gives the input's
// gradient at once; backward_weight runs what waited, once.
TEST(Stage, ASplitBackwardGivesTheInputGradientFirstAndTheWeightsAtW) {
  Linear lin;
  // The product y = x W written as a layer that defers W's gradient, x W's
  // own being the input's: autograd sees W through a detached copy.
  const at::Tensor w = lin.w;
  Stage st(1, /*last=*/false, [w](const at::Tensor& x, const MicroBatch&) {
    const at::Tensor y = at::tanh(at::matmul(x, w.detach()));
    // The weight's gradient of the product, from the gradient reaching y.
    y.register_hook([x, w, y](const at::Tensor& g) {
      const at::Tensor gy = g * (1 - y.detach() * y.detach());
      auto product = [x = x.detach(), w, gy] { w.mutable_grad() = at::matmul(x.t(), gy); };
      if (!defer_weight_grad(product)) product();
    });
    return y;
  });
  const at::Tensor out = st.forward(0, MicroBatch{}, input());
  const at::Tensor g = at::ones_like(out);
  st.backward_input(0, g);
  const at::Tensor dx = st.take_input_grad(0);
  EXPECT_TRUE(dx.allclose(at::matmul(1 - out.detach() * out.detach(), w.detach().t()), 1e-10, 0)) << dx;
  EXPECT_FALSE(lin.w.grad().defined()) << "the weight's gradient came before its W";
  EXPECT_THROW(st.output(0), std::logic_error);  // the graph went with the input backward
  st.backward_weight(0);
  ASSERT_TRUE(lin.w.grad().defined());
  EXPECT_TRUE(lin.w.grad().allclose(sum_loss_weight_grad(lin), 1e-10, 0)) << lin.w.grad();
  EXPECT_THROW(st.backward_weight(0), std::logic_error);  // once
  // Outside a split backward the same layer computes the weight's gradient at once.
  lin.w.mutable_grad() = at::Tensor();
  st.forward(1, MicroBatch{}, input());
  st.backward(1, g);
  EXPECT_TRUE(lin.w.grad().allclose(sum_loss_weight_grad(lin), 1e-10, 0)) << lin.w.grad();
}

TEST(Stage, TheForwardSeesTheMicroBatchAndResetForgetsTheStep) {
  Stage st(0, false, [](const at::Tensor& x, const MicroBatch& m) { return x * m.extra; });
  MicroBatch m;
  m.extra = at::full({1}, 3.0, at::kDouble);
  EXPECT_TRUE(st.forward(0, m, input()).equal(input() * 3));
  st.reset();
  EXPECT_NO_THROW(st.forward(0, m, input()));
}

}  // namespace
}  // namespace hp::runtime
