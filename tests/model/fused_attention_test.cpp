// fused_causal_attention (model/fused_attention.hpp): the composed causal
// attention's output and qkv gradient, at shapes from one position to more
// positions than a block of the BLAS, in double and float.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "model/fused_attention.hpp"

namespace hp::model {
namespace {

// The attention as composed operators, as CausalSelfAttention composes it
// where the fused one does not run.
at::Tensor composed(const at::Tensor& qkv, int64_t heads, int64_t head_dim) {
  const int64_t batch = qkv.size(0), seq = qkv.size(1);
  const auto parts = qkv.view({batch, seq, 3, heads, head_dim}).permute({2, 0, 3, 1, 4}).unbind(0);
  const auto future = at::ones({seq, seq}, at::TensorOptions().dtype(at::kBool)).triu(1);
  const auto scores =
      (parts[0].matmul(parts[1].transpose(-1, -2)) / std::sqrt(double(head_dim)))
          .masked_fill(future, -std::numeric_limits<double>::infinity());
  return at::softmax(scores, -1).matmul(parts[2]).transpose(1, 2).reshape({batch, seq, heads * head_dim});
}

struct Result {
  at::Tensor out, grad;
};

template <class Attention>
Result run(Attention attention, const at::Tensor& qkv_value, const at::Tensor& weight) {
  const at::Tensor qkv = qkv_value.detach().requires_grad_(true);
  const at::Tensor out = attention(qkv);
  torch::autograd::backward({(out * weight).sum()});
  return {out.detach(), qkv.grad()};
}

void expect_matches(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, at::ScalarType dtype, double tol) {
  SCOPED_TRACE(testing::Message() << "batch " << batch << " seq " << seq << " heads " << heads << " head_dim "
                                  << head_dim << " " << at::toString(dtype));
  at::manual_seed(batch * 1000 + seq);
  const auto opts = at::TensorOptions().dtype(dtype);
  const at::Tensor qkv = at::randn({batch, seq, 3 * heads * head_dim}, opts);
  const at::Tensor weight = at::randn({batch, seq, heads * head_dim}, opts);
  ASSERT_TRUE(fused_attention_supports(qkv)) << "this machine's LibTorch calls a BLAS the process can find";
  const Result fused = run([&](const at::Tensor& t) { return fused_causal_attention(t, heads, head_dim); }, qkv, weight);
  const Result reference = run([&](const at::Tensor& t) { return composed(t, heads, head_dim); }, qkv, weight);
  ASSERT_EQ(fused.out.sizes(), reference.out.sizes());
  EXPECT_TRUE(at::allclose(fused.out, reference.out, tol, tol))
      << "largest difference " << (fused.out - reference.out).abs().max().item<double>();
  EXPECT_TRUE(at::allclose(fused.grad, reference.grad, tol, tol))
      << "largest difference " << (fused.grad - reference.grad).abs().max().item<double>();
}

TEST(FusedAttentionTest, MatchesTheComposedAttentionInDouble) {
  expect_matches(1, 1, 1, 2, at::kDouble, 1e-12);
  expect_matches(2, 7, 3, 4, at::kDouble, 1e-12);
  expect_matches(3, 33, 2, 8, at::kDouble, 1e-12);
  expect_matches(2, 130, 4, 16, at::kDouble, 1e-12);
}

TEST(FusedAttentionTest, MatchesTheComposedAttentionInFloat) {
  expect_matches(2, 32, 4, 16, at::kFloat, 2e-5);
  expect_matches(2, 128, 4, 64, at::kFloat, 2e-5);
}

TEST(FusedAttentionTest, TakesANonContiguousProjection) {
  at::manual_seed(3);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor qkv = at::randn({5, 2, 3 * 2 * 4}, opts).transpose(0, 1);  // [2, 5, 24], strided
  const at::Tensor weight = at::randn({2, 5, 8}, opts);
  const Result fused = run([](const at::Tensor& t) { return fused_causal_attention(t, 2, 4); }, qkv, weight);
  const Result reference = run([](const at::Tensor& t) { return composed(t, 2, 4); }, qkv, weight);
  EXPECT_TRUE(at::allclose(fused.out, reference.out, 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(fused.grad, reference.grad, 1e-12, 1e-12));
}

TEST(FusedAttentionTest, RunsUnderInferenceMode) {
  at::manual_seed(5);
  // Long enough that the pairs are split over threads.
  const at::Tensor qkv = at::randn({2, 256, 3 * 4 * 16}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor reference = composed(qkv, 4, 16);
  c10::InferenceMode inference;
  EXPECT_TRUE(at::allclose(fused_causal_attention(qkv, 4, 16), reference, 1e-12, 1e-12));
}

TEST(FusedAttentionTest, SaysWhereItDoesNotRun) {
  EXPECT_FALSE(fused_attention_supports(at::zeros({1, 1, 6}, at::TensorOptions().dtype(at::kHalf))));
  // A sequence whose score matrix has more entries than BLAS's int counts: composed instead, not refused.
  const at::Tensor too_long = at::zeros({1, 46341, 6}, at::TensorOptions().dtype(at::kFloat));
  EXPECT_FALSE(fused_attention_supports(too_long));
  EXPECT_THROW(fused_causal_attention(too_long, 1, 2), c10::Error);
  EXPECT_TRUE(fused_attention_supports(at::zeros({1, 46340, 6}, at::TensorOptions().dtype(at::kFloat))));
  EXPECT_THROW(fused_causal_attention(at::zeros({1, 1, 6}, at::TensorOptions().dtype(at::kLong)), 1, 2),
               c10::Error);
  EXPECT_THROW(fused_causal_attention(at::zeros({1, 1, 7}, at::TensorOptions().dtype(at::kDouble)), 1, 2),
               c10::Error);
}

}  // namespace
}  // namespace hp::model
