#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "train/grad_clip.hpp"

namespace hp::train {
namespace {

at::Tensor param_with_grad(std::vector<double> grad) {
  auto p = at::zeros({static_cast<std::int64_t>(grad.size())}, at::kDouble).requires_grad_(true);
  p.mutable_grad() = at::tensor(grad, at::kDouble);
  return p;
}

// This rank: "a" (3,4 -> 25), "b" (12 -> 144), "tied" (a duplicate: 100 -> 10000, not counted).
NamedParams rank_params() {
  return {{"a", param_with_grad({3, 4})}, {"b", param_with_grad({12})}, {"tied", param_with_grad({100})}};
}

TEST(GradClip, LocalSumExcludesDuplicates) {
  const auto p = rank_params();
  EXPECT_DOUBLE_EQ(local_grad_sq_sum(p), 25.0 + 144.0 + 10000.0);
  EXPECT_DOUBLE_EQ(local_grad_sq_sum(p, {"tied"}), 169.0);
}

TEST(GradClip, GlobalNormOverRanksAndScaling) {
  const auto p = rank_params();
  int calls = 0;
  double seen = -1;
  // Fake collective: the other rank contributes 31 (so the total is 200).
  AllReduceSum all_reduce = [&](double local) {
    ++calls;
    seen = local;
    return local + 31.0;
  };
  GradClipOptions o;
  o.max_norm = 2.0;
  const double norm = clip_grad_norm(p, o, all_reduce, {"tied"});
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(seen, 169.0);
  EXPECT_DOUBLE_EQ(norm, std::sqrt(200.0));
  const double scale = 2.0 / (std::sqrt(200.0) + 1e-6);
  EXPECT_DOUBLE_EQ(p.at("a").grad()[0].item<double>(), 3.0 * scale);
  EXPECT_DOUBLE_EQ(p.at("a").grad()[1].item<double>(), 4.0 * scale);
  EXPECT_DOUBLE_EQ(p.at("b").grad()[0].item<double>(), 12.0 * scale);
  EXPECT_DOUBLE_EQ(p.at("tied").grad()[0].item<double>(), 100.0 * scale);  // duplicates are scaled too
}

TEST(GradClip, NoClipBelowThresholdOrWhenDisabled) {
  auto p = rank_params();
  GradClipOptions o;
  o.max_norm = 1000.0;
  EXPECT_DOUBLE_EQ(clip_grad_norm(p, o, nullptr, {"tied"}), 13.0);  // empty all-reduce: one rank
  EXPECT_DOUBLE_EQ(p.at("b").grad()[0].item<double>(), 12.0);
  o.max_norm = 0.0;
  EXPECT_DOUBLE_EQ(clip_grad_norm(p, o, nullptr), std::sqrt(10169.0));
  EXPECT_DOUBLE_EQ(p.at("tied").grad()[0].item<double>(), 100.0);
}

TEST(GradClip, NonFiniteNormLeavesGradsAlone) {
  NamedParams p{{"a", param_with_grad({1.0, std::nan("")})}, {"b", param_with_grad({5.0})}};
  p.emplace("nograd", at::zeros({2}, at::kDouble).requires_grad_(true));
  GradClipOptions o;
  o.max_norm = 1.0;
  EXPECT_TRUE(std::isnan(clip_grad_norm(p, o, nullptr)));
  EXPECT_DOUBLE_EQ(p.at("b").grad()[0].item<double>(), 5.0);
  EXPECT_FALSE(p.at("nograd").grad().defined());
}

TEST(GradClip, FloatGradsAreSummedInDouble) {
  auto p = at::zeros({3}, at::kFloat).requires_grad_(true);
  p.mutable_grad() = at::full({3}, 0.1f, at::kFloat);
  const double g = static_cast<double>(0.1f);
  EXPECT_DOUBLE_EQ(local_grad_sq_sum({{"p", p}}), 3 * g * g);
}

// Grads larger than the sum's chunk (2^20 elements), split across chunks, of
// two dtypes: every element counts once, in double.
TEST(GradClip, LargeGradsOfTwoDtypesCountEveryElementOnce) {
  NamedParams params;
  double expected = 0;
  const std::vector<std::pair<std::int64_t, at::ScalarType>> shapes = {
      {3 * (1 << 20) + 5, at::kFloat}, {7, at::kFloat}, {(1 << 20) - 3, at::kDouble}, {(1 << 20) + 1, at::kFloat},
      {11, at::kDouble}};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto [n, dtype] = shapes[i];
    auto p = at::zeros({n}, dtype).requires_grad_(true);
    p.mutable_grad() = at::arange(n, at::kDouble).remainder(7).sub(3).mul(0.5 + i).to(dtype);
    expected += p.grad().to(at::kDouble).pow(2).sum().item<double>();
    params.emplace("p" + std::to_string(i), p);
  }
  EXPECT_NEAR(local_grad_sq_sum(params), expected, 1e-12 * expected);
}

TEST(GradClip, RejectsBadInput) {
  auto p = rank_params();
  GradClipOptions o;
  o.max_norm = -1;
  try {
    clip_grad_norm(p, o, nullptr);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("train.clip_grad"), std::string::npos) << e.what();
  }
  EXPECT_THROW(clip_grad_norm(p, GradClipOptions{}, nullptr, {"missing"}), std::invalid_argument);
}

}  // namespace
}  // namespace hp::train
