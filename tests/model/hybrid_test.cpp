// The Hybrid model's parts: the pattern, the selective scan against a naive
// loop, MoE routing against a dense reference, the learned contraction, and
// chunks that compose into the whole model.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "model/hybrid.hpp"
#include "model/hybrid_stages.hpp"
#include "model/hyper_connection.hpp"
#include "model/mtp.hpp"
#include "model/test_util.hpp"

namespace hp::model {
namespace {

using testing::expect_invalid;

HybridConfig config(const std::string& pattern, bool mhc) {
  HybridConfig c;
  c.pattern = pattern;
  c.base.hidden_size = 8;
  c.base.num_attention_heads = 2;
  c.base.vocab_size = 16;
  c.base.max_seq_len = 8;
  c.base.dtype = DType::Float64;
  c.base.seed = 5;
  c.base.enable_mhc_connections = mhc;
  c.base.mhc_num_residual_streams = 2;
  return c;
}

TEST(HybridPattern, ParsesLayersSegmentsAndMtpParts) {
  const auto p = HybridPattern::parse("M*|-E||M/*-/*-");
  EXPECT_EQ(p.layers.size(), 5u);
  EXPECT_EQ(p.segment_sizes, (std::vector<int>{2, 2, 0, 1}));
  EXPECT_EQ(p.mtp_depth, 2);
  EXPECT_EQ(p.mtp_layers, (std::vector<LayerKind>{LayerKind::Attention, LayerKind::MLP}));
  EXPECT_EQ(p.stage_layer_counts(2, 2), (std::vector<int>{2, 2, 0, 1}));
  EXPECT_EQ(p.stage_layer_counts(1, 1), (std::vector<int>{5}));  // one stage: boundaries ignored
  EXPECT_EQ(HybridPattern::parse("M*-EM").stage_layer_counts(2, 1), (std::vector<int>{3, 2}));
}

TEST(HybridPattern, BadPatternsNameWhatIsAccepted) {
  expect_invalid([] { HybridPattern::parse("M*x"); },
                 {"model.hybrid_pattern", "'x'", "accepted: M (Mamba), * (attention), - (MLP), E (mixture of experts)"});
  expect_invalid([] { HybridPattern::parse("M*/*-/-*"); }, {"every MTP part must be the same layers"});
  expect_invalid([] { HybridPattern::parse("M*//"); }, {"MTP part 1 has no layer"});
  expect_invalid([] { HybridPattern::parse("M*/*|-"); }, {"pipeline boundaries (|) belong to the decoder"});
  expect_invalid([] { HybridPattern::parse("M*|-").stage_layer_counts(2, 2); },
                 {"2 pipeline segments, but schedule.pp 2 x schedule.vpp 2 = 4 stages"});
  expect_invalid([] { HybridPattern::parse("M").stage_layer_counts(2, 1); }, {"1 layers cannot fill 2 stages"});
}

TEST(SelectiveScan, EqualsANaiveLoop) {
  auto gen = at::detail::createCPUGenerator(2);
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const int64_t b = 2, s = 5, e = 3, n = 4;
  const auto x = at::randn({b, s, e}, gen, opts), dt = at::rand({b, s, e}, gen, opts);
  const auto A = -at::rand({e, n}, gen, opts), B = at::randn({b, s, n}, gen, opts), C = at::randn({b, s, n}, gen, opts);
  const auto D = at::randn({e}, gen, opts);
  const auto y = selective_scan(x, dt, A, B, C, D);
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t c = 0; c < e; ++c) {
      std::vector<double> h(n, 0.0);
      for (int64_t t = 0; t < s; ++t) {
        double out = D[c].item<double>() * x[i][t][c].item<double>();
        for (int64_t k = 0; k < n; ++k) {
          const double d = dt[i][t][c].item<double>();
          h[k] = std::exp(d * A[c][k].item<double>()) * h[k] + d * B[i][t][k].item<double>() * x[i][t][c].item<double>();
          out += h[k] * C[i][t][k].item<double>();
        }
        EXPECT_NEAR(y[i][t][c].item<double>(), out, 1e-12) << i << "," << t << "," << c;
      }
    }
  }
}

TEST(MambaMixer, IsCausalAndSelective) {
  const auto c = config("M", false);
  MambaMixer m(c.base, c.mamba);
  {
    at::NoGradGuard g;
    for (auto& p : m.named_parameters())
      p.value().copy_(hybrid_initial_value("layers.0.mixer." + p.key(), p.value().sizes(), c.base));
  }
  auto gen = at::detail::createCPUGenerator(4);
  const auto u = at::randn({1, 6, 8}, gen, at::TensorOptions().dtype(at::kDouble));
  auto v = u.clone();
  v[0][4] += 1.0;  // change step 4: steps 0-3 must not move
  const auto a = m.forward(u), b = m.forward(v);
  EXPECT_TRUE(a.narrow(1, 0, 4).allclose(b.narrow(1, 0, 4), 0, 1e-14));
  EXPECT_FALSE(a.narrow(1, 4, 2).allclose(b.narrow(1, 4, 2), 0, 1e-6));
}

TEST(MixtureOfExperts, RoutedOutputEqualsADenseReferenceAndTheBalanceLossTrainsTheRouter) {
  auto c = config("E", false);
  c.moe.num_experts = 4;
  c.moe.top_k = 2;
  MixtureOfExperts moe(c.base, c.moe);
  {
    at::NoGradGuard g;
    for (auto& p : moe.named_parameters())
      p.value().copy_(hybrid_initial_value("layers.0.mixer." + p.key(), p.value().sizes(), c.base) * 10);
  }
  auto gen = at::detail::createCPUGenerator(6);
  const auto u = at::randn({2, 5, 8}, gen, at::TensorOptions().dtype(at::kDouble));
  const auto out = moe.forward(u);
  // Dense: every expert on every token, weighted by a gate that is zero off the top k.
  const auto tokens = u.reshape({-1, 8});
  const auto r = moe.route(tokens);
  const auto gate = at::zeros({tokens.size(0), 4}, at::kDouble).scatter(1, r.experts, r.weights);
  at::Tensor dense = at::zeros_like(tokens);
  for (int e = 0; e < 4; ++e) dense = dense + moe.expert(e, tokens) * gate.select(1, e).unsqueeze(1);
  EXPECT_TRUE(out.reshape({-1, 8}).allclose(dense, 0, 1e-12));
  EXPECT_GT(moe.last_aux_loss(), 0.0);
  // The balance loss reaches the router even with a zero output gradient.
  torch::autograd::backward({out}, {at::zeros_like(out)});
  EXPECT_GT(moe.named_parameters()["router.weight"].grad().abs().sum().item<double>(), 0.0);
}

TEST(LearnedContraction, EqualsTheFormulaPerStream) {
  const auto c = config("-", true);
  LearnedContraction k(c.base);
  {
    at::NoGradGuard g;
    k.weight.copy_(at::linspace(-1, 1, 16, at::kDouble).view({2, 8}));
    k.base.copy_(at::tensor({0.3, -0.2}, at::kDouble));
    k.scale.fill_(1.5);
  }
  auto gen = at::detail::createCPUGenerator(8);
  const auto x = at::randn({3, 16}, gen, at::TensorOptions().dtype(at::kDouble));
  const auto y = k.forward(x);
  const double eps = c.base.layernorm_eps;
  for (int t = 0; t < 3; ++t) {
    const double rms = 1.0 / std::sqrt(x[t].pow(2).mean().item<double>() + eps);
    at::Tensor want = at::zeros({8}, at::kDouble);
    for (int j = 0; j < 2; ++j) {
      const auto xj = x[t].narrow(0, j * 8, 8);
      const double s = 1.5 * (xj * k.weight[j]).sum().item<double>() * rms + k.base[j].item<double>();
      want += (1.0 / (1.0 + std::exp(-s)) + eps) * xj;
    }
    EXPECT_TRUE(y[t].allclose(want, 0, 1e-12)) << t;
  }
}

TEST(HybridChunk, ChunksComposeIntoTheWholeModelAndAnEmptyStageIsIndependent) {
  at::manual_seed(108);  // a failure reproduces
  for (bool mhc : {false, true}) {
    const auto c = config("M*-E", mhc);
    const auto whole = build_reference_hybrid(c);
    HybridChunk a(c, 0, 2, true, false), empty(c, 2, 2, false, false), b(c, 2, 4, false, true);
    const auto tokens = at::randint(16, {2, 6}, at::kLong);
    const auto h = a.forward(tokens);
    EXPECT_EQ(h.size(2), mhc ? 16 : 8);
    const auto e = empty.forward(h);
    EXPECT_FALSE(e.is_same(h));
    EXPECT_NE(e.data_ptr(), h.data_ptr());
    EXPECT_TRUE(e.equal(h));
    EXPECT_TRUE(b.forward(e).allclose(whole->forward(tokens), 0, 1e-12)) << "mhc " << mhc;
    // Graph-connected: a gradient on the empty stage's output reaches its input.
    const auto leaf = h.detach().requires_grad_(true);
    torch::autograd::backward({empty.forward(leaf).sum()});
    ASSERT_TRUE(leaf.grad().defined());
    EXPECT_TRUE(leaf.grad().equal(at::ones_like(leaf))) << "an empty stage's backward is the identity";
  }
}

TEST(HybridChunk, MtpDepthsLossesReachTheirParametersAndTheSharedEmbedding) {
  at::manual_seed(109);  // a failure reproduces
  auto c = config("M*/-*/-*", true);
  const auto whole = build_reference_hybrid(c);
  const auto tokens = at::randint(16, {2, 7}, at::kLong);
  const auto input = tokens.narrow(1, 0, 6), target = tokens.narrow(1, 1, 6);
  const auto logits = whole->forward(input, target);
  ASSERT_TRUE(whole->mtp());
  const auto losses = whole->mtp()->take_mean_losses();  // of the one forward
  ASSERT_EQ(losses.size(), 2u);
  for (double l : losses) EXPECT_NEAR(l, std::log(16.0), 0.5);  // near uniform at init
  // Only the MTP loss: a zero gradient on the main output still trains the MTP path.
  torch::autograd::backward({logits}, {at::zeros_like(logits)});
  auto params = whole->named_parameters();
  for (const char* name : {"mtp.2.proj.weight", "mtp.1.layers.1.mixer.qkv.weight", "mtp.1.final_contraction.weight",
                           "embedding.word.weight", "lm_head.weight"})
    EXPECT_GT(params[name].grad().abs().sum().item<double>(), 0.0) << name;
  EXPECT_THROW(whole->forward(input), std::invalid_argument);  // the final stage needs the target
}

TEST(HybridStages, AStandaloneMhcMtpStageIsRejectedAndOtherLayoutsPass) {
  schedule::ScheduleOptions s;
  s.kind = schedule::ScheduleKind::Interleaved;
  s.pp = 2;
  s.vpp = 2;
  s.micro_batches = 4;
  HybridStagesOptions o;
  o.config = config("M*|E|-|/-*", true);  // the final segment holds only MTP
  expect_invalid([&] { check_hybrid_layout(o, s); }, {"standalone MTP stage", "give the last segment a decoder layer"});
  o.config.base.enable_mhc_connections = false;
  EXPECT_NO_THROW(check_hybrid_layout(o, s));
  o.config = config("M*|E||-/-*", true);  // an empty middle segment is fine
  EXPECT_NO_THROW(check_hybrid_layout(o, s));
  s.kind = schedule::ScheduleKind::MPipe;
  s.mpipe.transpose_layers = 1;
  expect_invalid([&] { check_hybrid_layout(o, s); }, {"a Hybrid model takes schedule.mpipe.transpose_layers 0"});
}

TEST(HybridStages, OverlappedExpertCommunicationIsRejectedWithMhcPipelineParallelism) {
  schedule::ScheduleOptions s;
  s.kind = schedule::ScheduleKind::OneFOneB;
  s.pp = 2;
  s.micro_batches = 4;
  HybridStagesOptions o;
  o.config = config("M*E|-M", true);
  EXPECT_NO_THROW(check_hybrid_layout(o, s));
  o.config.moe.overlap_expert_parallel_comm = true;
  expect_invalid([&] { check_hybrid_layout(o, s); },
                 {"model.overlap_moe_expert_parallel_comm with model.enable_mhc_connections and schedule.pp 2",
                  "not supported with mHC pipeline parallelism"});
  // Without mHC pipeline parallelism it is still refused: there is no expert parallelism to overlap.
  o.config.base.enable_mhc_connections = false;
  expect_invalid([&] { check_hybrid_layout(o, s); }, {"expert parallelism, which hyperpipe does not have"});
}

}  // namespace
}  // namespace hp::model
