// Selective mHC recompute (model/mhc_recompute.hpp, TransformerConfig's
// recompute_modules "mhc"): the same loss and gradients as without it, for
// GPT and Hybrid (MTP depths included) and every group size, and less memory
// held between forward and backward the larger the groups.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "runtime/tensor_memory.hpp"
#include "model/gpt.hpp"
#include "model/hybrid.hpp"
#include "model/recompute.hpp"
#include "model/test_util.hpp"

namespace hp::model {
namespace {

TransformerConfig mhc_gpt(bool recompute, int layer_num = 0, int layers = 3) {
  TransformerConfig c;
  c.num_layers = layers;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.vocab_size = 16;
  c.max_seq_len = 32;
  c.dtype = DType::Float64;
  c.enable_mhc_connections = true;
  c.mhc_init_gating_factor = 0.5;
  if (recompute) c.recompute_modules = "mhc";
  c.mhc_recompute_layer_num = layer_num;
  return c;
}

// Loss of one step and every gradient, by name.
template <class Model>
std::pair<double, std::map<std::string, at::Tensor>> step(Model& m, const at::Tensor& tokens) {
  const auto logits = m.forward(tokens.narrow(1, 0, tokens.size(1) - 1));
  const auto loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                           tokens.narrow(1, 1, tokens.size(1) - 1).reshape({-1}));
  torch::autograd::backward({loss});
  std::map<std::string, at::Tensor> grads;
  for (const auto& p : m.named_parameters()) grads[p.key()] = p.value().grad();
  return {loss.template item<double>(), grads};
}

void expect_same(const std::pair<double, std::map<std::string, at::Tensor>>& a,
                 const std::pair<double, std::map<std::string, at::Tensor>>& b) {
  EXPECT_EQ(a.first, b.first);
  ASSERT_EQ(a.second.size(), b.second.size());
  for (const auto& [name, g] : a.second) {
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_TRUE(g.allclose(b.second.at(name), 0, 1e-13)) << name;
  }
}

TEST(Recompute, AFunctionRecomputedInBackwardGivesTheSameGradients) {
  const auto w = at::linspace(-1, 1, 6, at::kDouble).view({3, 2}).requires_grad_(true);
  const auto x = at::arange(6, at::kDouble).view({2, 3}).requires_grad_(true);
  auto f = [&w](const std::vector<at::Tensor>& in) -> std::vector<at::Tensor> {
    const auto y = at::tanh(at::matmul(in[0], w));
    return {y, y.sum(-1)};
  };
  const auto outs = recompute_in_backward(f, {x});
  EXPECT_TRUE(outs[0].requires_grad());
  torch::autograd::backward({outs[0].sum() + outs[1].pow(2).sum()});
  const auto gw = w.grad().clone(), gx = x.grad().clone();
  w.mutable_grad().zero_();
  x.mutable_grad().zero_();
  const auto plain = f({x});
  torch::autograd::backward({plain[0].sum() + plain[1].pow(2).sum()});
  EXPECT_TRUE(gw.allclose(w.grad(), 0, 1e-15));
  EXPECT_TRUE(gx.allclose(x.grad(), 0, 1e-15));
}

TEST(Recompute, MhcRecomputeOnAndOffGiveTheSameNumbers) {
  at::manual_seed(115);  // a failure reproduces
  const auto tokens = at::randint(16, {2, 9}, at::kLong);
  for (int layer_num : {0, 1, 2}) {
    auto a = build_reference_gpt(mhc_gpt(false)), b = build_reference_gpt(mhc_gpt(true, layer_num));
    expect_same(step(*a, tokens), step(*b, tokens));
  }
  // The Hybrid model, its MTP depth's layers recomputed too (the MTP loss
  // reaches the parameters through the injected gradient).
  HybridConfig h;
  h.pattern = "M*E-/-*";
  h.base = mhc_gpt(false);
  const auto input = tokens.narrow(1, 0, 8), target = tokens.narrow(1, 1, 8);
  auto hybrid_step = [&](HybridChunk& m) {
    torch::autograd::backward({m.forward(input, target).pow(2).mean()});
    std::map<std::string, at::Tensor> grads;
    for (const auto& p : m.named_parameters()) grads[p.key()] = p.value().grad();
    return std::pair<double, std::map<std::string, at::Tensor>>{0.0, grads};
  };
  auto ha = build_reference_hybrid(h);
  const auto reference = hybrid_step(*ha);
  for (int layer_num : {0, 1, 3}) {
    h.base = mhc_gpt(true, layer_num);
    auto hb = build_reference_hybrid(h);
    expect_same(reference, hybrid_step(*hb));
  }
}

// Megatron's meaning of --mhc-recompute-layer-num: every layer recomputes,
// N layers a group, each group keeping only its boundary's merge output, so
// the memory held falls as the groups grow: off > N=1 > N=2 > one group (0).
TEST(Recompute, MhcRecomputeHoldsLessMemoryTheLargerItsGroups) {
  at::manual_seed(116);  // a failure reproduces
  const auto tokens = at::randint(16, {4, 33}, at::kLong);
  namespace memory = hp::runtime::tensor_memory;
  memory::install();
  std::vector<std::int64_t> held;
  std::vector<double> losses;
  for (const auto& [on, n] : std::vector<std::pair<bool, int>>{{false, 0}, {true, 1}, {true, 2}, {true, 0}}) {
    auto m = build_reference_gpt(mhc_gpt(on, n, 4));
    const std::int64_t before = memory::live_bytes();
    const auto logits = m->forward(tokens.narrow(1, 0, 32));
    held.push_back(memory::live_bytes() - before);  // what the graph keeps for backward
    torch::autograd::backward({logits.pow(2).mean()});
    losses.push_back(m->named_parameters()["layers.0.attention_hc.mapping_proj.weight"].grad().sum().item<double>());
  }
  std::cout << "activation bytes held after forward, 4 mHC layers: " << held[0] << " without recompute, " << held[1]
            << " with groups of 1, " << held[2] << " of 2, " << held[3] << " in one group" << std::endl;
  EXPECT_LT(held[1], held[0] * 6 / 10);
  EXPECT_LT(held[2], held[1]);
  EXPECT_LT(held[3], held[2]);
  for (double l : losses) EXPECT_NEAR(l, losses[0], 1e-12 * std::abs(losses[0]));
}

TEST(Recompute, OptionsAreChecked) {
  using testing::expect_invalid;
  auto c = mhc_gpt(true);
  c.recompute_modules = "mhc,mlp";
  expect_invalid([&] { c.validate(); }, {"mhc cannot be recomputed together with mlp"});
  c.recompute_modules = "attention";
  expect_invalid([&] { c.validate(); }, {"attention cannot be recomputed selectively here; allowed: mhc"});
  c = mhc_gpt(true);
  c.enable_mhc_connections = false;
  expect_invalid([&] { c.validate(); }, {"recompute_modules mhc needs multi-stream residuals"});
  c = mhc_gpt(false, 2);
  expect_invalid([&] { c.validate(); }, {"mhc_recompute_layer_num needs mhc in model.recompute_modules"});
  c = mhc_gpt(true, -1);
  expect_invalid([&] { c.validate(); }, {"mhc_recompute_layer_num must be >= 0"});
}

}  // namespace
}  // namespace hp::model
