#include "model/lm_loss.hpp"

#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "model/test_util.hpp"

namespace hp::model {
namespace {

using testing::expect_invalid;

TEST(LmLoss, IsMeanTokenCrossEntropy) {
  at::manual_seed(113);  // a failure reproduces
  const auto logits = at::randn({2, 5, 7}, at::TensorOptions().dtype(at::kDouble));
  const auto labels = at::randint(7, {2, 5}, at::TensorOptions().dtype(at::kLong));
  const auto loss = lm_loss(logits, labels);
  EXPECT_EQ(loss.dim(), 0);
  // -mean over tokens of log_softmax(logits)[label]
  const auto expected =
      -logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1).mean();
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-14);
  // Equal-size micro-batches along dim 0 average to the full-batch loss.
  const double halves =
      0.5 * (lm_loss(logits.narrow(0, 0, 1), labels.narrow(0, 0, 1)).item<double>() +
             lm_loss(logits.narrow(0, 1, 1), labels.narrow(0, 1, 1)).item<double>());
  EXPECT_NEAR(halves, loss.item<double>(), 1e-14);
}

TEST(LmLoss, RejectsMismatchedInputs) {
  const auto logits = at::zeros({2, 5, 7}, at::TensorOptions().dtype(at::kDouble));
  const auto labels = at::zeros({2, 5}, at::TensorOptions().dtype(at::kLong));
  expect_invalid([&] { lm_loss(logits.select(0, 0), labels); }, {"logits", "[batch, seq, vocab]"});
  expect_invalid([&] { lm_loss(logits, labels.narrow(1, 0, 4)); }, {"labels", "[2, 5]", "[2, 4]"});
  expect_invalid([&] { lm_loss(logits, labels.to(at::kInt)); }, {"labels must be int64"});
  expect_invalid([&] { lm_loss(logits, labels.add(7)); }, {"[0, 7)", "model.vocab_size"});
  expect_invalid([&] { lm_loss(logits, labels.sub(1)); }, {"[-1, -1]"});
}

}  // namespace
}  // namespace hp::model
