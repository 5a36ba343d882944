// fused_linear (model/fused_linear.hpp): at::linear's output and gradients,
// with the weight's gradient added into weight.grad() in place when it exists.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "model/fused_linear.hpp"
#include "runtime/weight_grad_store.hpp"

namespace hp::model {
namespace {

struct Grads {
  at::Tensor out, x, weight, bias;
  at::Tensor param;  // the weight itself, whose .grad a deferred product sets later
};

// One backward of sum(y * r) through `linear` from fresh leaves; `prior`, when
// defined, is the weight's .grad before it (the optimizer's buffer).
template <class Linear>
Grads run(Linear linear, bool with_bias, const at::Tensor& prior, bool weight_requires_grad = true) {
  at::manual_seed(7);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor x = at::randn({3, 5, 4}, opts).requires_grad_(true);
  const at::Tensor w = at::randn({6, 4}, opts).requires_grad_(weight_requires_grad);
  const at::Tensor b = with_bias ? at::randn({6}, opts).requires_grad_(true) : at::Tensor();
  const at::Tensor r = at::randn({3, 5, 6}, opts);
  if (prior.defined()) w.mutable_grad() = prior.clone();
  const at::Tensor y = linear(x, w, b);
  torch::autograd::backward({(y * r).sum()});
  return {y.detach(), x.grad(), w.grad(), with_bias ? b.grad() : at::Tensor(), w};
}

const auto plain = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) { return at::linear(x, w, b); };
const auto fused = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) { return fused_linear(x, w, b); };

void expect_equal(const at::Tensor& a, const at::Tensor& b, const char* what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (!a.defined()) return;
  EXPECT_TRUE(at::allclose(a, b, 1e-14, 1e-14)) << what << ":\n" << a << "\n" << b;
}

void expect_same(const Grads& a, const Grads& b) {
  EXPECT_TRUE(at::equal(a.out, b.out)) << "the forward must be at::linear's to the bit";
  expect_equal(a.x, b.x, "x's gradient");
  expect_equal(a.weight, b.weight, "the weight's gradient");
  expect_equal(a.bias, b.bias, "the bias's gradient");
}

TEST(FusedLinearTest, WithoutAGradientBufferItMatchesAtLinear) {
  expect_same(run(fused, true, {}), run(plain, true, {}));
  expect_same(run(fused, false, {}), run(plain, false, {}));
}

TEST(FusedLinearTest, AddsIntoAnExistingGradientInPlace) {
  at::manual_seed(11);
  const at::Tensor prior = at::randn({6, 4}, at::TensorOptions().dtype(at::kDouble));
  for (bool bias : {true, false}) {
    const Grads f = run(fused, bias, prior);
    expect_same(f, run(plain, bias, prior));
    EXPECT_TRUE(at::allclose(f.weight, prior + run(plain, bias, {}).weight, 1e-14, 1e-14));
  }
}

TEST(FusedLinearTest, AddsInTheProductNotThroughAutograd) {
  at::manual_seed(12);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor x = at::randn({5, 4}, opts);
  for (bool with_buffer : {true, false}) {
    const at::Tensor w = at::randn({6, 4}, opts).requires_grad_(true);
    const at::Tensor buffer = at::zeros({6, 4}, opts);
    if (with_buffer) w.mutable_grad() = buffer;
    // What autograd hands the weight's accumulator: nothing when the product added it.
    bool handed = false;
    w.register_hook([&handed](const at::Tensor& g) { handed = g.defined(); });
    torch::autograd::backward({fused_linear(x, w).sum()});
    EXPECT_EQ(handed, !with_buffer);
    // d sum(x W^T) / dW = 1^T x, each entry a column sum of x.
    EXPECT_TRUE(at::allclose(w.grad(), x.sum(0).expand({6, 4}), 1e-12, 1e-12)) << w.grad();
    if (with_buffer) {
      EXPECT_TRUE(w.grad().is_same(buffer)) << "the optimizer's buffer must stay the weight's .grad";
    }
  }
}

// A zero-bubble schedule's input backward (runtime/weight_grad_store.hpp):
// inside the scope x's and the bias's gradients come at once, the weight's
// product waits in the list, and running it gives at::linear's gradient,
// added into a buffer as in place or set where there is none.
TEST(FusedLinearTest, InsideADeferralScopeTheWeightProductWaitsForTheWeightBackward) {
  for (bool buffer : {false, true}) {
    const at::Tensor prior = buffer ? at::full({6, 4}, 0.5, at::kDouble) : at::Tensor();
    const Grads want = run(plain, true, prior);
    runtime::WeightGradWork work;
    Grads got;
    {
      const runtime::DeferWeightGrads scope(&work);
      got = run(fused, true, prior);
    }
    ASSERT_EQ(work.size(), 1u) << "one weight product deferred";
    expect_equal(got.x, want.x, "x's gradient");
    expect_equal(got.bias, want.bias, "the bias's gradient");
    if (buffer) {
      EXPECT_TRUE(at::equal(got.weight, prior)) << "the input backward added to the weight's buffer";
    } else {
      EXPECT_FALSE(got.weight.defined()) << "the input backward made the weight's gradient";
    }
    for (auto& product : work) product();  // the weight backward
    expect_equal(got.param.grad(), want.weight, "the weight's gradient after the weight backward");
    if (buffer) {
      EXPECT_TRUE(got.param.grad().is_same(got.weight)) << "the optimizer's buffer must stay the weight's .grad";
    }
  }
}

TEST(FusedLinearTest, HooksAfterTheWeightsAccumulatorStillFire) {
  // The data-parallel reducer marks a parameter ready from its accumulator's post hook.
  at::manual_seed(13);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor w = at::randn({6, 4}, opts).requires_grad_(true);
  w.mutable_grad() = at::zeros({6, 4}, opts);
  int fired = 0;
  auto acc = torch::autograd::impl::grad_accumulator(w);
  acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
      [&fired](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
        ++fired;
        return outputs;
      }));
  torch::autograd::backward({fused_linear(at::randn({5, 4}, opts), w).sum()});
  EXPECT_EQ(fired, 1);
}

TEST(FusedLinearTest, AFrozenWeightGetsNoGradient) {
  const Grads f = run(fused, true, {}, /*weight_requires_grad=*/false);
  EXPECT_FALSE(f.weight.defined());
  expect_same(f, run(plain, true, {}, false));
}

}  // namespace
}  // namespace hp::model
