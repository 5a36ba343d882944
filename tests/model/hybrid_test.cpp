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

// Megatron's learned_output_contract: each stream's gate sees every stream
// (hc_head_fn [n, nC]), written here per token from its formula.
TEST(LearnedContraction, EachGateSeesEveryStreamAsMegatronsFormula) {
  const auto c = config("-", true);
  LearnedContraction k(c.base);
  ASSERT_EQ(k.weight.sizes(), (std::vector<int64_t>{2, 16}));
  {
    at::NoGradGuard g;
    k.weight.copy_(at::linspace(-1, 1, 32, at::kDouble).view({2, 16}));
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
      double dot = 0;
      for (int i = 0; i < 16; ++i) dot += x[t][i].item<double>() * k.weight[j][i].item<double>();
      const double s = 1.5 * dot * rms + k.base[j].item<double>();
      const auto xj = x[t].narrow(0, j * 8, 8);
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
  for (const char* name : {"mtp.2.e_proj.weight", "mtp.2.h_proj.weight", "mtp.1.final_norm.weight", "mtp.1.layers.1.mixer.qkv.weight", "mtp.1.final_contraction.weight",
                           "embedding.word.weight", "lm_head.weight"})
    EXPECT_GT(params[name].grad().abs().sum().item<double>(), 0.0) << name;
  EXPECT_THROW(whole->forward(input), std::invalid_argument);  // the final stage needs the target
}

// Megatron's MTP with hyper-connections, written here from its formulas
// (multi_token_prediction.py's mHC branch) around the model's own layers:
// depth 1 takes the decoder's streams before the contraction, normalises each
// stream, adds the projected embedding to every stream, runs its layers on the
// streams, and contracts and normalises with its own head before the LM head.
TEST(HybridChunk, MtpTakesTheDecodersStreamsAsMegatronDoes) {
  at::manual_seed(110);
  auto c = config("M*/-*", true);
  c.base.mhc_num_residual_streams = 3;
  c.base.mhc_init_gating_factor = 0.5;  // streams that differ
  const auto whole = build_reference_hybrid(c);
  const auto tokens = at::randint(16, {2, 7}, at::kLong);
  const auto input = tokens.narrow(1, 0, 6), target = tokens.narrow(1, 1, 6);
  const auto logits = whole->forward(input, target);
  const double mtp_loss = whole->mtp()->take_mean_losses().at(0);

  auto params = whole->named_parameters();
  auto modules = whole->named_modules();
  const double eps = c.base.layernorm_eps;
  const int64_t n = 3, C = 8;
  auto layer_norm = [&](const at::Tensor& v, const std::string& prefix) {
    const auto mean = v.mean(-1, true), var = (v - mean).pow(2).mean(-1, true);
    return (v - mean) / at::sqrt(var + eps) * params[prefix + ".weight"] + params[prefix + ".bias"];
  };
  auto run = [&](const std::string& layer, const at::Tensor& x) {
    return std::dynamic_pointer_cast<HybridLayer>(modules[layer])->forward(x, nullptr);
  };
  auto contract = [&](const at::Tensor& x, const std::string& prefix) {  // per token, as the formula
    const auto w = params[prefix + ".weight"], base = params[prefix + ".base"], scale = params[prefix + ".scale"];
    const auto rms = at::rsqrt(x.pow(2).mean(-1, true) + eps);
    at::Tensor y = at::zeros_like(x.narrow(-1, 0, C));
    for (int64_t j = 0; j < n; ++j) {
      const auto gate = at::sigmoid(scale * (x * w[j]).sum(-1, true) * rms + base[j]) + eps;
      y = y + gate * x.narrow(-1, j * C, C);
    }
    return y;
  };
  const auto embed = [&](const at::Tensor& ids) {
    return params["embedding.word.weight"].index_select(0, ids.flatten()).view({ids.size(0), ids.size(1), C});
  };
  at::NoGradGuard no_grad;
  at::Tensor x = embed(input) + params["embedding.position.weight"].narrow(0, 0, 6);
  x = at::cat(std::vector<at::Tensor>(n, x), -1);
  for (const char* layer : {"layers.0", "layers.1"}) x = run(layer, x);
  // The main output: the LM head of the final norm of the contraction.
  const auto main = at::matmul(layer_norm(contract(x, "final_contraction"), "final_norm"), params["lm_head.weight"].t());
  EXPECT_TRUE(main.allclose(logits, 0, 1e-12));
  // Depth 1 on the streams x.
  const int64_t len = 5;
  const auto e = layer_norm(embed(target.narrow(1, 0, len)), "mtp.1.token_norm");
  std::vector<at::Tensor> streams;
  for (int64_t j = 0; j < n; ++j) {
    const auto hs = layer_norm(x.narrow(1, 0, len).narrow(-1, j * C, C), "mtp.1.hidden_norm");
    streams.push_back(at::matmul(e, params["mtp.1.e_proj.weight"].t()) + at::matmul(hs, params["mtp.1.h_proj.weight"].t()));
  }
  at::Tensor ms = at::cat(streams, -1);
  for (const char* layer : {"mtp.1.layers.0", "mtp.1.layers.1"}) ms = run(layer, ms);
  const auto h = layer_norm(contract(ms, "mtp.1.final_contraction"), "mtp.1.final_norm");
  const auto depth_logits = at::matmul(h, params["lm_head.weight"].t());
  const double want = at::cross_entropy_loss(depth_logits.reshape({-1, 16}), target.narrow(1, 1, len).flatten()).item<double>();
  EXPECT_NEAR(mtp_loss, want, 1e-12 * want);
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
