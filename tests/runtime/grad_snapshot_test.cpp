// Gradient snapshots (runtime/grad_snapshot.hpp): set aside, zero, add back.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "runtime/grad_snapshot.hpp"

namespace hp::runtime {
namespace {

at::Tensor param_with_grad(std::vector<double> grad) {
  auto p = at::zeros({static_cast<std::int64_t>(grad.size())}, at::kDouble).requires_grad_(true);
  p.mutable_grad() = at::tensor(grad, at::kDouble);
  return p;
}

NamedParams rank_params() {
  return {{"a", param_with_grad({3, 4})}, {"b", param_with_grad({12})}, {"tied", param_with_grad({100})}};
}

TEST(GradSnapshot, SnapshotZeroesAndAddsBack) {
  auto p = rank_params();
  p.emplace("nograd", at::zeros({1}, at::kDouble).requires_grad_(true));
  const GradSnapshot snap = take_grad_snapshot(p);
  EXPECT_EQ(snap.size(), 3u);
  EXPECT_EQ(p.at("a").grad().abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(p.at("a").grad().defined());
  // "This run's" contribution, then "reduced" (doubled), then the snapshot back.
  at::NoGradGuard g;
  p.at("a").mutable_grad().add_(1.0);
  p.at("a").mutable_grad().mul_(2.0);
  add_grad_snapshot(p, snap);
  EXPECT_DOUBLE_EQ(p.at("a").grad()[0].item<double>(), 3.0 + 2.0);
  EXPECT_DOUBLE_EQ(p.at("a").grad()[1].item<double>(), 4.0 + 2.0);
  EXPECT_DOUBLE_EQ(p.at("b").grad()[0].item<double>(), 12.0);
  // An undefined grad becomes a copy.
  NamedParams q{{"x", at::zeros({2}, at::kDouble).requires_grad_(true)}};
  add_grad_snapshot(q, {{"x", at::ones({2}, at::kDouble)}});
  EXPECT_DOUBLE_EQ(q.at("x").grad().sum().item<double>(), 2.0);
  EXPECT_THROW(add_grad_snapshot(q, {{"y", at::ones({2})}}), std::invalid_argument);
  EXPECT_THROW(add_grad_snapshot(q, {{"x", at::ones({3})}}), std::invalid_argument);
}

}  // namespace
}  // namespace hp::runtime
