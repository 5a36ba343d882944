// The whole tiny GPT (model/gpt.hpp) and its LM loss (model/lm_loss.hpp)
// against the formulas written out as loops (model/formulas.hpp), in double
// at 1e-12: token embedding + position embedding, the pre-norm blocks, the
// final LayerNorm, the LM head (its own weight or the tied word embedding)
// and the mean token cross entropy. gpt_test compares chunks with the single
// model, built of the same modules; this compares the single model with the
// math. (Kept apart from gpt_test.cpp so the section and its helpers stand alone.)
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "model/formulas.hpp"
#include "model/gpt.hpp"
#include "model/lm_loss.hpp"

namespace hp::model {
namespace {

using formula::expect_close;

using formula::kTol;

TransformerConfig tiny_config(bool tie) {
  TransformerConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.ffn_hidden_size = 16;
  c.vocab_size = 11;
  c.max_seq_len = 7;
  c.layernorm_eps = 1e-3;
  c.tie_embeddings = tie;
  c.dtype = DType::Float64;
  return c;
}

at::Tensor random_ids(int64_t vocab, int64_t batch, int64_t seq, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randint(vocab, {batch, seq}, gen, at::TensorOptions().dtype(at::kLong));
}

// The model by formula: x_bt = word[token_bt] + position[t], the blocks, the
// final norm, logits = final_norm(x) head^T (head = lm_head.weight, or the word
// embedding when tied; no bias).
at::Tensor gpt_logits(const TransformerConfig& c, const torch::OrderedDict<std::string, at::Tensor>& p,
                      const at::Tensor& tokens) {
  const int64_t batch = tokens.size(0), seq = tokens.size(1), hidden = c.hidden_size;
  const at::Tensor word = p["embedding.word.weight"].detach().contiguous();
  const at::Tensor position = p["embedding.position.weight"].detach().contiguous();
  const auto wa = word.accessor<double, 2>();
  const auto pa = position.accessor<double, 2>();
  const auto ta = tokens.accessor<int64_t, 2>();
  at::Tensor x = at::empty({batch, seq, hidden}, at::kDouble);
  auto xa = x.accessor<double, 3>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t i = 0; i < hidden; ++i) xa[b][t][i] = wa[ta[b][t]][i] + pa[t][i];
  for (int l = 0; l < c.num_layers; ++l)
    x = formula::block(x, p, "layers." + std::to_string(l) + ".", c.num_attention_heads, c.layernorm_eps);
  const at::Tensor n = formula::layer_norm(x, p["final_norm.weight"], p["final_norm.bias"], c.layernorm_eps);
  return formula::linear(n, c.tie_embeddings ? word : p["lm_head.weight"]);
}

TEST(GPTFormula, TheWholeForwardAndItsLossEqualTheFormulaWithAnOwnOrATiedHead) {
  for (bool tie : {false, true}) {
    SCOPED_TRACE(tie ? "tied" : "untied");
    const auto c = tiny_config(tie);
    const auto model = build_reference_gpt(c);
    // The initial values are regular (norms 1, biases 0, weights of std 0.02):
    // random ones make every parameter show in the logits.
    formula::randomize_parameters(*model, tie ? 21 : 22);
    const auto params = model->named_parameters();
    ASSERT_EQ(params.contains("lm_head.weight"), !tie);
    const at::Tensor tokens = random_ids(c.vocab_size, 2, 6, 23);
    const at::Tensor labels = random_ids(c.vocab_size, 2, 6, 24);
    const at::Tensor logits = model->forward(tokens);
    const at::Tensor want = gpt_logits(c, params, tokens);
    expect_close(logits, want, kTol, "logits");
    const double loss = lm_loss(logits, labels).item<double>();
    EXPECT_NEAR(loss, formula::mean_cross_entropy(want, labels), kTol * std::abs(loss) + kTol);
  }
}

TEST(GPTFormula, TheLmLossIsTheMeanOverEveryTokenOfLogSumExpMinusTheLabelsLogit) {
  // Logits of a wide range (a shift-free log-sum-exp would overflow at 800),
  // and every label value, 0 included: lm_loss ignores no index.
  auto gen = at::detail::createCPUGenerator(25);
  const at::Tensor logits = at::randn({3, 5, 11}, gen, at::TensorOptions().dtype(at::kDouble)) * 4.0;
  logits[1][2][3] = 800.0;
  at::Tensor labels = random_ids(11, 3, 5, 26);
  labels.view({-1}).narrow(0, 0, 11).copy_(at::arange(11, at::kLong));
  const double loss = lm_loss(logits, labels).item<double>();
  EXPECT_NEAR(loss, formula::mean_cross_entropy(logits, labels), kTol * std::abs(loss));
}

}  // namespace
}  // namespace hp::model
