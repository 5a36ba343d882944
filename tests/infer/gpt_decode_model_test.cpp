// Decoding with the KV cache against the model's own full forward: every
// position's logits agree (float64), for plain, tied and mHC GPTs, and the
// sampler is greedy at temperature 0 and reproducible for a seed.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "infer/gpt_decode_model.hpp"
#include "infer/sampler.hpp"
#include "model/gpt.hpp"
#include "model/kv_cache.hpp"

namespace hp::infer {
namespace {

model::TransformerConfig config(bool mhc, bool tie) {
  model::TransformerConfig c;
  c.num_layers = 3;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.vocab_size = 23;
  c.max_seq_len = 12;
  c.dtype = model::DType::Float64;
  c.init_std = 0.3;  // far from uniform attention, so a wrong mask or offset shows
  c.tie_embeddings = tie;
  c.enable_mhc_connections = mhc;
  c.mhc_num_residual_streams = 3;
  c.mhc_init_gating_factor = 0.5;
  return c;
}

double max_rel_error(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / (b.abs().max() + 1e-300)).item<double>();
}

class KVCacheDecoding : public ::testing::TestWithParam<std::pair<bool, bool>> {};

TEST_P(KVCacheDecoding, EveryPositionMatchesTheFullForward) {
  at::manual_seed(101);  // a failure reproduces
  const auto [mhc, tie] = GetParam();
  at::NoGradGuard no_grad;
  auto gpt = model::build_reference_gpt(config(mhc, tie));
  const at::Tensor tokens = at::randint(23, {2, 11}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor full = gpt->forward(tokens);  // [2, 11, vocab]
  // A prefill of 4 positions, then one position at a time, then a chunk of 3.
  model::KVCache cache;
  std::vector<at::Tensor> pieces;
  pieces.push_back(gpt->decode(tokens.narrow(1, 0, 4), cache));
  for (int t = 4; t < 8; ++t) pieces.push_back(gpt->decode(tokens.narrow(1, t, 1), cache));
  pieces.push_back(gpt->decode(tokens.narrow(1, 8, 3), cache));
  EXPECT_EQ(cache.positions, 11);
  EXPECT_LT(max_rel_error(at::cat(pieces, 1), full), 1e-12);
  // The cache is full: one more position is refused, naming the limit.
  try {
    gpt->decode(tokens.narrow(1, 0, 2), cache);
    ADD_FAILURE() << "decoding past max_seq_len was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.max_seq_len 12"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Gpt, KVCacheDecoding,
                         ::testing::Values(std::pair{false, false}, std::pair{false, true}, std::pair{true, false}));

// A VL caption's decoding: the image features go in with the first tokens and
// every later token attends to them through the cache.
TEST(KVCacheDecoding, APrefixTakesItsPositionsBeforeTheTokens) {
  at::manual_seed(102);  // a failure reproduces
  at::NoGradGuard no_grad;
  auto gpt = model::build_reference_gpt(config(false, false));
  const at::Tensor prefix = at::randn({2, 4, 16}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor tokens = at::randint(23, {2, 6}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor full = gpt->forward(tokens, prefix);  // [2, 4 + 6, vocab]
  model::KVCache cache;
  std::vector<at::Tensor> pieces;
  pieces.push_back(gpt->decode(tokens.narrow(1, 0, 2), prefix, cache));
  EXPECT_EQ(cache.positions, 6);
  for (int t = 2; t < 6; ++t) pieces.push_back(gpt->decode(tokens.narrow(1, t, 1), cache));
  EXPECT_EQ(cache.positions, 10);
  EXPECT_LT(max_rel_error(at::cat(pieces, 1), full), 1e-12);
}

TEST(GptDecodeLayout, MhcDecodesOnOneRankOnly) {
  schedule::ScheduleOptions l;
  l.kind = schedule::ScheduleKind::OneFOneB;
  l.pp = 2;
  l.micro_batches = 1;
  try {
    check_gpt_decode_layout(config(true, false), l);
    ADD_FAILURE() << "mHC decoding over two ranks was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("an mHC model decodes only with schedule.pp 1"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_gpt_decode_layout(config(false, false), l));
  l.pp = 1;
  l.kind = schedule::ScheduleKind::NoPipelining;
  EXPECT_NO_THROW(check_gpt_decode_layout(config(true, false), l));
}

TEST(Sampler, GreedyTakesTheArgMaxAndSamplingRepeatsForASeed) {
  at::manual_seed(103);  // a failure reproduces
  const at::Tensor logits = at::randn({4, 50}, at::TensorOptions().dtype(at::kDouble));
  EXPECT_TRUE(Sampler({}).next(logits).equal(logits.argmax(1)));
  SamplingOptions top1;
  top1.temperature = 1.0;
  top1.top_k = 1;
  EXPECT_TRUE(Sampler(top1).next(logits).equal(logits.argmax(1)));
  SamplingOptions warm;
  warm.temperature = 2.0;
  warm.top_k = 10;
  warm.seed = 7;
  Sampler a(warm), b(warm);
  std::vector<at::Tensor> draws;
  for (int i = 0; i < 20; ++i) {
    const at::Tensor x = a.next(logits);
    EXPECT_TRUE(x.equal(b.next(logits)));
    // Only the ten likeliest tokens of each row are ever drawn.
    const at::Tensor tenth = std::get<0>(logits.topk(10, 1)).select(1, 9);
    EXPECT_TRUE((logits.gather(1, x.unsqueeze(1)).squeeze(1) >= tenth).all().item<bool>());
    draws.push_back(x);
  }
  EXPECT_FALSE(at::stack(draws).eq(logits.argmax(1)).all().item<bool>());  // not greedy
  SamplingOptions bad;
  bad.temperature = -1;
  EXPECT_THROW(bad.validate(), std::invalid_argument);
}

}  // namespace
}  // namespace hp::infer
