// The GPT block's pieces (model/layers.hpp) against their formulas written
// out as loops (model/formulas.hpp), in double at 1e-12: LayerNorm with its
// eps and affine weights, causal self-attention (the fused path, the composed
// path a KV cache takes, and decoding in steps), the exact-GELU MLP and the
// pre-norm block with its two residual adds. The pipeline tests compare chunks
// with a model made of the same modules, so only tests like these see a wrong
// layer. Parameters are set to seeded random values: the placeholders (ones,
// zeros) would hide a wrong affine weight or bias.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "model/formulas.hpp"
#include "model/fused_attention.hpp"
#include "model/kv_cache.hpp"
#include "model/layers.hpp"

namespace hp::model {
namespace {

using formula::expect_close;

using formula::kTol;

// head_dim 5: a scale 1 / sqrt(5) that no power of two stands in for.
TransformerConfig block_config() {
  TransformerConfig c;
  c.hidden_size = 10;
  c.num_attention_heads = 2;
  c.ffn_hidden_size = 24;
  c.max_seq_len = 8;
  c.dtype = DType::Float64;
  return c;
}

at::Tensor random_input(at::IntArrayRef shape, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn(shape, gen, at::TensorOptions().dtype(at::kDouble));
}

TEST(LayerNormFormula, NormalisesEachRowWithItsEpsAndAffineWeights) {
  // A large eps and rows of small variance: eps changes the output by far
  // more than the tolerance, so a dropped or misplaced eps shows.
  for (double eps : {1e-5, 0.25}) {
    SCOPED_TRACE(::testing::Message() << "eps " << eps);
    LayerNorm norm(12, eps, at::kDouble);
    formula::randomize_parameters(norm, 1);
    at::Tensor x = random_input({3, 4, 12}, 2);
    x.select(1, 0).mul_(0.01);  // variance ~1e-4: eps 1e-5 matters too
    x.select(1, 1).add_(3.0);   // a mean far from 0
    expect_close(norm.forward(x), formula::layer_norm(x, norm.weight, norm.bias, eps), kTol, "layer norm");
  }
}

TEST(CausalSelfAttentionFormula, TheFusedPathIsTheSoftmaxOfScaledScoresOverThePastTimesTheValues) {
  const auto c = block_config();
  CausalSelfAttention attention(c);
  formula::randomize_parameters(attention, 3);
  const at::Tensor x = random_input({2, 7, 10}, 4);
  // forward(x) without a cache takes the fused path where this holds.
  ASSERT_TRUE(fused_attention_supports(at::zeros({2, 7, 30}, at::kDouble)));
  const auto p = attention.named_parameters();
  expect_close(attention.forward(x),
               formula::causal_attention(x, p["qkv.weight"], p["qkv.bias"], p["proj.weight"], p["proj.bias"], 2), kTol,
               "fused attention");
}

TEST(CausalSelfAttentionFormula, TheComposedPathWithAnEmptyCacheIsTheSameFormula) {
  const auto c = block_config();
  CausalSelfAttention attention(c);
  formula::randomize_parameters(attention, 5);
  const at::Tensor x = random_input({2, 7, 10}, 6);
  AttentionCache cache;  // a cache: the attention is composed of batched products
  const auto p = attention.named_parameters();
  expect_close(attention.forward(x, &cache),
               formula::causal_attention(x, p["qkv.weight"], p["qkv.bias"], p["proj.weight"], p["proj.bias"], 2), kTol,
               "composed attention");
}

TEST(CausalSelfAttentionFormula, DecodingInStepsGivesTheFormulaOverTheWholeSequence) {
  // Queries after cached positions see those and the earlier new ones: the
  // mask is shifted by the cache's length.
  const auto c = block_config();
  CausalSelfAttention attention(c);
  formula::randomize_parameters(attention, 7);
  const at::Tensor x = random_input({2, 7, 10}, 8);
  AttentionCache cache;
  const at::Tensor steps = at::cat({attention.forward(x.narrow(1, 0, 3), &cache),
                                    attention.forward(x.narrow(1, 3, 3), &cache),
                                    attention.forward(x.narrow(1, 6, 1), &cache)},
                                   1);
  const auto p = attention.named_parameters();
  expect_close(steps,
               formula::causal_attention(x, p["qkv.weight"], p["qkv.bias"], p["proj.weight"], p["proj.bias"], 2), kTol,
               "decoded attention");
}

TEST(MLPFormula, IsFc2OfTheExactErfGeluOfFc1) {
  const auto c = block_config();
  MLP mlp(c);
  formula::randomize_parameters(mlp, 9);
  // Inputs of a few units: the tanh approximation is off by up to ~1e-3 there.
  const at::Tensor x = random_input({2, 5, 10}, 10) * 2.0;
  const auto p = mlp.named_parameters();
  expect_close(mlp.forward(x), formula::mlp(x, p["fc1.weight"], p["fc1.bias"], p["fc2.weight"], p["fc2.bias"]), kTol,
               "mlp");
}

TEST(TransformerBlockFormula, AddsAttentionOfTheNormedInputThenTheMlpOfTheNormedSumToTheResidual) {
  auto c = block_config();
  c.layernorm_eps = 1e-3;
  TransformerBlock block(c);
  formula::randomize_parameters(block, 11);
  const at::Tensor x = random_input({2, 6, 10}, 12);
  const at::Tensor want = formula::block(x, block.named_parameters(), "", 2, 1e-3);
  expect_close(block.forward(x), want, kTol, "block, fused attention");
  AttentionCache cache;
  expect_close(block.forward(x, &cache), want, kTol, "block, composed attention");
}

}  // namespace
}  // namespace hp::model
