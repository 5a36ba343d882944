// mHC (model/hyper_connection.hpp): Sinkhorn, expansion and contraction, the
// mappings at init, n = 1, the forward against a naive per-token loop, and
// GPT chunks with mHC (global names, initial values, shapes).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <set>

#include "model/gpt.hpp"
#include "model/gpt_stages.hpp"
#include "model/hyper_connection.hpp"
#include "model/test_util.hpp"

namespace hp::model {
namespace {

TransformerConfig mhc_config(int streams) {
  TransformerConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.vocab_size = 16;
  c.max_seq_len = 8;
  c.dtype = DType::Float64;
  c.enable_mhc_connections = true;
  c.mhc_num_residual_streams = streams;
  c.seed = 11;
  return c;
}

// A HyperConnection with the values a GPT gives it, plus a non-zero bias and
// larger gates so the mappings are far from their init.
std::shared_ptr<HyperConnection> hyper_connection(const TransformerConfig& c, bool perturb) {
  auto hc = std::make_shared<HyperConnection>(c);
  at::NoGradGuard g;
  for (auto& p : hc->named_parameters())
    p.value().copy_(initial_parameter_value("layers.0.attention_hc." + p.key(), p.value().sizes(), c));
  if (perturb) {
    hc->alpha_pre.fill_(0.7);
    hc->alpha_post.fill_(-0.4);
    hc->alpha_res.fill_(1.3);
    hc->bias.copy_(at::linspace(-1, 1, hc->bias.numel(), at::kDouble));
  }
  return hc;
}

at::Tensor streams_input(const TransformerConfig& c) {
  auto gen = at::detail::createCPUGenerator(5);
  return at::randn({2, 3, c.residual_width()}, gen, at::TensorOptions().dtype(at::kDouble));
}

TEST(Sinkhorn, TheResultIsDoublyStochastic) {
  // Random logits, and the H_res of a HyperConnection far from its init.
  auto gen = at::detail::createCPUGenerator(3);
  const auto c = mhc_config(4);
  for (const at::Tensor& s : {sinkhorn_knopp(at::exp(at::randn({64, 4, 4}, gen, at::TensorOptions().dtype(at::kDouble))), 20),
                              hyper_connection(c, true)->mappings(streams_input(c)).res}) {
    EXPECT_LT((s.sum(-1) - 1).abs().max().item<double>(), 1e-6);
    EXPECT_LT((s.sum(-2) - 1).abs().max().item<double>(), 1e-6);
    EXPECT_GT(s.min().item<double>(), 0.0);
  }
}

TEST(Streams, ExpandThenMeanContractIsTheIdentityAndExpansionIsNoView) {
  at::manual_seed(110);  // a failure reproduces
  const at::Tensor x = at::randn({2, 3, 8}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor e = expand_streams(x, 4);
  EXPECT_EQ(e.sizes().vec(), (std::vector<int64_t>{2, 3, 32}));
  EXPECT_FALSE(e.is_view());
  EXPECT_NE(e.data_ptr(), x.data_ptr());
  EXPECT_TRUE(e.narrow(-1, 24, 8).equal(x));  // stream 3
  EXPECT_TRUE(contract_streams_mean(e, 4).allclose(x, 0, 1e-15));
}

TEST(HyperConnection, AtInitHResIsCloseToUniformNotTheIdentity) {
  const auto c = mhc_config(4);
  const auto m = hyper_connection(c, false)->mappings(streams_input(c));
  EXPECT_LT((m.res - 0.25).abs().max().item<double>(), 0.02);
  EXPECT_LT((m.pre - 0.5).abs().max().item<double>(), 0.02);
  EXPECT_LT((m.post - 1.0).abs().max().item<double>(), 0.04);
}

TEST(HyperConnection, OneStreamIsAPlainResidualAroundAGatedSublayer) {
  const auto c = mhc_config(1);
  auto hc = hyper_connection(c, true);
  const at::Tensor x = streams_input(c);
  auto f = [](const at::Tensor& u) { return at::tanh(u) * 3; };
  const auto m = hc->mappings(x);
  EXPECT_TRUE(m.res.allclose(at::ones_like(m.res), 0, 1e-12));  // H_res = [[1]]: the identity residual
  EXPECT_TRUE(hc->forward(x, f).allclose(x + m.post * f(m.pre * x), 0, 1e-12));
}

// The math of the spec, token by token, with plain loops.
TEST(HyperConnection, ForwardEqualsANaivePerTokenComputation) {
  const auto c = mhc_config(3);
  auto hc = hyper_connection(c, true);
  const at::Tensor x = streams_input(c);
  auto f = [](const at::Tensor& u) { return at::sin(u) + 0.5 * u; };
  const at::Tensor got = hc->forward(x, f);
  const int64_t n = 3, C = c.hidden_size;
  const at::Tensor phi = hc->named_parameters()["mapping_proj.weight"];
  for (int64_t b = 0; b < x.size(0); ++b) {
    for (int64_t t = 0; t < x.size(1); ++t) {
      const at::Tensor v = x[b][t];  // [nC]
      const double r = 1.0 / (v.norm().item<double>() / std::sqrt(double(n * C)) + 1e-6);
      const at::Tensor proj = at::matmul(phi, v);
      std::vector<double> h(n * n + 2 * n);
      for (int64_t k = 0; k < n * n + 2 * n; ++k) {
        const double alpha = k < n ? hc->alpha_pre.item<double>()
                                   : k < 2 * n ? hc->alpha_post.item<double>() : hc->alpha_res.item<double>();
        h[k] = r * proj[k].item<double>() * alpha + hc->bias[k].item<double>();
      }
      std::vector<double> res(n * n);
      for (int64_t i = 0; i < n; ++i) {
        double mx = -1e300;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, h[2 * n + i * n + j]);
        for (int64_t j = 0; j < n; ++j) res[i * n + j] = std::exp(h[2 * n + i * n + j] - mx);
      }
      for (int it = 0; it < c.mhc_sinkhorn_iterations; ++it) {
        for (int64_t i = 0; i < n; ++i) {
          double s = 0;
          for (int64_t j = 0; j < n; ++j) s += res[i * n + j];
          for (int64_t j = 0; j < n; ++j) res[i * n + j] /= std::max(s, 1e-6);
        }
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t i = 0; i < n; ++i) s += res[i * n + j];
          for (int64_t i = 0; i < n; ++i) res[i * n + j] /= std::max(s, 1e-6);
        }
      }
      at::Tensor u = at::zeros({C}, at::kDouble);
      for (int64_t j = 0; j < n; ++j) u += v.narrow(0, j * C, C) / (1 + std::exp(-h[j]));
      const at::Tensor fu = f(u);
      for (int64_t i = 0; i < n; ++i) {
        at::Tensor want = fu * (2.0 / (1 + std::exp(-h[n + i])));
        for (int64_t j = 0; j < n; ++j) want = want + res[i * n + j] * v.narrow(0, j * C, C);
        EXPECT_TRUE(got[b][t].narrow(0, i * C, C).allclose(want, 0, 1e-12)) << "token " << b << "," << t << " stream " << i;
      }
    }
  }
}

TEST(HyperConnection, GradientsReachEveryParameterAndTheInput) {
  const auto c = mhc_config(2);
  auto hc = hyper_connection(c, true);
  const at::Tensor x = streams_input(c).requires_grad_(true);
  torch::autograd::backward({hc->forward(x, [](const at::Tensor& u) { return u * u; }).sum()});
  for (const auto& p : hc->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
  ASSERT_TRUE(x.grad().defined());
  EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
}

TEST(GPTWithMhc, NamesOfTheModelWithoutMhcAreUnchangedAndTheStreamsTravelBetweenStages) {
  at::manual_seed(111);  // a failure reproduces
  TransformerConfig plain = mhc_config(4);
  plain.enable_mhc_connections = false;
  const TransformerConfig mhc = mhc_config(4);
  const auto a = build_reference_gpt(plain), b = build_reference_gpt(mhc);
  std::set<std::string> with;
  for (const auto& p : b->named_parameters()) with.insert(p.key());
  for (const auto& p : a->named_parameters()) {
    ASSERT_TRUE(with.count(p.key())) << p.key();
    EXPECT_TRUE(p.value().equal(b->named_parameters()[p.key()])) << p.key();  // same initial value too
  }
  EXPECT_TRUE(with.count("layers.1.mlp_hc.mapping_proj.weight"));
  EXPECT_EQ(b->named_parameters()["layers.0.attention_hc.mapping_proj.weight"].sizes().vec(),
            (std::vector<int64_t>{24, 32}));
  EXPECT_DOUBLE_EQ(b->named_parameters()["layers.0.attention_hc.alpha_res"].item<double>(), 0.01);
  // Two stages: stage 0 sends [batch, seq, 4 * hidden].
  const Partition part = Partition::even(2, 2, 1);
  GPTChunk first(mhc, part, 0), last(mhc, part, 1);
  const at::Tensor tokens = at::randint(16, {2, 5}, at::kLong);
  const at::Tensor h = first.forward(tokens);
  EXPECT_EQ(h.sizes().vec(), first.output_shape(2, 5));
  EXPECT_EQ(h.size(2), 32);
  EXPECT_EQ(last.forward(h).sizes().vec(), (std::vector<int64_t>{2, 5, 16}));
}

TEST(GPTWithMhc, PipelinedMhcWithMultiTokenPredictionIsRejectedElsewhereItRuns) {
  at::manual_seed(112);  // a failure reproduces
  GPTStagesOptions g;
  g.config = mhc_config(2);
  g.config.mtp_num_layers = 1;
  schedule::ScheduleOptions s;
  s.kind = schedule::ScheduleKind::OneFOneB;
  s.pp = 2;
  s.micro_batches = 2;
  testing::expect_invalid([&] { check_gpt_layout(g, s); },
                          {"a pipelined GPT with mHC cannot run multi-token prediction", "use the Hybrid model"});
  g.config.enable_mhc_connections = false;
  EXPECT_NO_THROW(check_gpt_layout(g, s));
  g.config.enable_mhc_connections = true;
  s.kind = schedule::ScheduleKind::NoPipelining;
  s.pp = 1;
  EXPECT_NO_THROW(check_gpt_layout(g, s));
  const auto m = build_reference_gpt(g.config);
  const auto tokens = at::randint(16, {2, 6}, at::kLong);
  EXPECT_THROW(m->forward(tokens.narrow(1, 0, 5)), std::invalid_argument);  // MTP needs the target
  EXPECT_EQ(m->forward_with_target(tokens.narrow(1, 0, 5), tokens.narrow(1, 1, 5)).size(2), 16);
  EXPECT_TRUE(m->named_parameters().contains("mtp.1.layers.0.attention_hc.mapping_proj.weight"));
}

TEST(GPTWithMhc, ConfigChecksNameTheOption) {
  using testing::expect_invalid;
  TransformerConfig c = mhc_config(0);
  expect_invalid([&] { c.validate(); }, {"model.mhc_num_residual_streams must be >= 1"});
  c = mhc_config(4);
  c.mhc_sinkhorn_iterations = 0;
  expect_invalid([&] { c.validate(); }, {"model.mhc_sinkhorn_iterations must be >= 1"});
  c = mhc_config(4);
  c.mhc_init_gating_factor = -0.1;
  expect_invalid([&] { c.validate(); }, {"model.mhc_init_gating_factor must be a finite number >= 0"});
}

}  // namespace
}  // namespace hp::model
