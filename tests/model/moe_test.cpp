// The mixture of experts (model/moe.hpp) against its formulas written out per
// token (Mixtral-style top-k routing, the Switch Transformer's balance loss),
// in double at 1e-12. For token t with router scores l_t = W_router u_t:
//   S_t    = the top_k experts by score,
//   g_te   = exp(l_te) / sum_{j in S_t} exp(l_tj)   for e in S_t (softmax over the k scores),
//   out_t  = sum_{e in S_t} g_te MLP_e(u_t),        MLP_e = fc2(gelu_erf(fc1 .)),
// and over the T tokens, with p_te = softmax over all X scores,
//   f_e    = #{t : e in S_t} / (T k),  P_e = (1 / T) sum_t p_te,
//   aux    = aux_loss_coeff * X * sum_e f_e P_e,
// whose gradient (f_e held constant) reaches the router scaled by aux_loss_scale:
//   d aux / d l_tj = aux_loss_coeff * X / T * p_tj (f_j - sum_e f_e p_te).
// hybrid_test's MixtureOfExperts test builds its dense reference from the
// module's own route() and expert(); here nothing of the module makes the
// expected value.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <numeric>

#include "model/formulas.hpp"
#include "model/moe.hpp"

namespace hp::model {
namespace {

using formula::expect_close;

using formula::kTol;
constexpr int kExperts = 4;

TransformerConfig moe_config() {
  TransformerConfig c;
  c.hidden_size = 6;
  c.num_attention_heads = 2;
  c.ffn_hidden_size = 10;
  c.dtype = DType::Float64;
  return c;
}

struct Expected {
  at::Tensor out;          // [T, C]
  double aux = 0;          // the balance loss
  at::Tensor router_grad;  // d aux / d router.weight, times the scale
};

Expected moe_formula(const at::Tensor& u, const torch::OrderedDict<std::string, at::Tensor>& p, const MoEOptions& o) {
  const at::Tensor tokens = formula::rows_of(u);
  const int64_t T = tokens.size(0), C = tokens.size(1), X = o.num_experts, k = o.top_k;
  const at::Tensor logits = formula::linear(tokens, p["router.weight"]).contiguous();  // [T, X]
  const auto la = logits.accessor<double, 2>();
  const auto ua = tokens.accessor<double, 2>();
  std::vector<at::Tensor> expert_out;  // MLP_e on every token (only the routed ones are used)
  for (int64_t e = 0; e < X; ++e) {
    const std::string n = "experts." + std::to_string(e) + ".";
    expert_out.push_back(formula::mlp(tokens, p[n + "fc1.weight"], p[n + "fc1.bias"], p[n + "fc2.weight"],
                                      p[n + "fc2.bias"]).contiguous());
  }
  Expected want;
  want.out = at::zeros({T, C}, at::kDouble);
  auto oa = want.out.accessor<double, 2>();
  std::vector<std::vector<double>> prob(T, std::vector<double>(X));
  std::vector<double> count(X, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<int64_t> order(X);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return la[t][a] > la[t][b]; });
    const double max = la[t][order[0]];
    double all = 0, chosen = 0;
    for (int64_t e = 0; e < X; ++e) all += std::exp(la[t][e] - max);
    for (int64_t i = 0; i < k; ++i) chosen += std::exp(la[t][order[i]] - max);
    for (int64_t e = 0; e < X; ++e) prob[t][e] = std::exp(la[t][e] - max) / all;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t e = order[i];
      const double gate = std::exp(la[t][e] - max) / chosen;
      const auto ea = expert_out[e].accessor<double, 2>();
      for (int64_t c = 0; c < C; ++c) oa[t][c] += gate * ea[t][c];
      count[e] += 1;
    }
  }
  std::vector<double> share(X), mean_prob(X, 0.0);
  for (int64_t e = 0; e < X; ++e) {
    share[e] = count[e] / double(T * k);
    for (int64_t t = 0; t < T; ++t) mean_prob[e] += prob[t][e] / double(T);
    want.aux += o.aux_loss_coeff * double(X) * share[e] * mean_prob[e];
  }
  want.router_grad = at::zeros({X, C}, at::kDouble);
  auto ga = want.router_grad.accessor<double, 2>();
  for (int64_t t = 0; t < T; ++t) {
    double fp = 0;
    for (int64_t e = 0; e < X; ++e) fp += share[e] * prob[t][e];
    for (int64_t j = 0; j < X; ++j) {
      const double dl = o.aux_loss_scale * o.aux_loss_coeff * double(X) / double(T) * prob[t][j] * (share[j] - fp);
      for (int64_t c = 0; c < C; ++c) ga[j][c] += dl * ua[t][c];
    }
  }
  return want;
}

TEST(MixtureOfExpertsFormula, EachTokenIsItsTopKExpertsWeightedByTheSoftmaxOverTheirScores) {
  for (int top_k : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "top_k " << top_k);
    MoEOptions o;
    o.num_experts = kExperts;
    o.top_k = top_k;
    MixtureOfExperts moe(moe_config(), o);
    formula::randomize_parameters(moe, 40 + top_k);
    auto gen = at::detail::createCPUGenerator(50 + top_k);
    const at::Tensor u = at::randn({2, 5, 6}, gen, at::TensorOptions().dtype(at::kDouble));
    const Expected want = moe_formula(u, moe.named_parameters(), o);
    expect_close(moe.forward(u), want.out.view({2, 5, 6}), kTol, "moe output");
  }
}

TEST(MixtureOfExpertsFormula, TheBalanceLossAndItsRouterGradientAreTheSwitchFormula) {
  MoEOptions o;
  o.num_experts = kExperts;
  o.top_k = 2;
  o.aux_loss_coeff = 0.1;
  o.aux_loss_scale = 0.25;  // as with 4 micro-batches
  MixtureOfExperts moe(moe_config(), o);
  formula::randomize_parameters(moe, 60);
  auto gen = at::detail::createCPUGenerator(61);
  const at::Tensor u = at::randn({3, 4, 6}, gen, at::TensorOptions().dtype(at::kDouble));
  const Expected want = moe_formula(u, moe.named_parameters(), o);
  const at::Tensor out = moe.forward(u);
  EXPECT_NEAR(moe.last_aux_loss(), want.aux, kTol * want.aux);
  // A zero gradient on the output: the router's gradient is the balance loss's alone.
  torch::autograd::backward({out}, {at::zeros_like(out)});
  // The gradient is small (~1e-3): the tolerance is relative to its scale.
  const double scale = want.router_grad.abs().max().item<double>();
  ASSERT_GT(scale, 0.0);
  expect_close(moe.named_parameters()["router.weight"].grad(), want.router_grad, kTol * scale, "router gradient");
}

}  // namespace
}  // namespace hp::model
