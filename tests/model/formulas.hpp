// The model's math written out from its formulas, for tests that check the
// modules against it (layers_test, gpt_test, mamba_test, moe_test). Every
// function here is a plain loop over double tensors (accessors, scalar
// arithmetic from <cmath>); none calls a module, a fused kernel or an ATen
// operator that computes the formula itself (no layer_norm, gelu, softmax,
// matmul, conv1d, cross_entropy). So a wrong module cannot make its own
// expected value: these are independent of src/model.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace hp::model::formula {

// What every comparison against these formulas must meet in double precision.
constexpr double kTol = 1e-12;

// x viewed as rows [rows, width] (its last dimension), contiguous, in double.
inline at::Tensor rows_of(const at::Tensor& x) {
  return x.detach().to(at::kDouble).reshape({-1, x.size(-1)}).contiguous();
}

// y = W x + b per row: x [..., in], W [out, in], b [out] or undefined.
// Calls inside this header are qualified (formula::): at:: has functions of
// the same names, which argument-dependent lookup would also find.
inline at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b = {}) {
  const at::Tensor X = rows_of(x), W = w.detach().contiguous();
  const at::Tensor B = b.defined() ? b.detach().contiguous() : at::zeros({w.size(0)}, at::kDouble);
  const int64_t rows = X.size(0), in = X.size(1), out = W.size(0);
  at::Tensor y = at::empty({rows, out}, at::kDouble);
  const auto xa = X.accessor<double, 2>();
  const auto wa = W.accessor<double, 2>();
  const auto ba = B.accessor<double, 1>();
  auto ya = y.accessor<double, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = ba[o];
      for (int64_t i = 0; i < in; ++i) s += wa[o][i] * xa[r][i];
      ya[r][o] = s;
    }
  }
  auto shape = x.sizes().vec();
  shape.back() = out;
  return y.view(shape);
}

// f applied to every element.
template <class F>
at::Tensor elementwise(const at::Tensor& x, F f) {
  at::Tensor y = x.detach().to(at::kDouble).contiguous().clone();
  double* p = y.data_ptr<double>();
  for (int64_t i = 0; i < y.numel(); ++i) p[i] = f(p[i]);
  return y;
}

// Exact GELU: u Phi(u) = u / 2 (1 + erf(u / sqrt 2)).
inline at::Tensor gelu(const at::Tensor& u) {
  return formula::elementwise(u, [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); });
}

// SiLU: u sigmoid(u).
inline at::Tensor silu(const at::Tensor& u) {
  return formula::elementwise(u, [](double v) { return v / (1.0 + std::exp(-v)); });
}

// Softplus: log(1 + e^u).
inline at::Tensor softplus(const at::Tensor& u) {
  return formula::elementwise(u, [](double v) { return std::log1p(std::exp(v)); });
}

// LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * w + b,
// var the biased (1 / n) variance.
inline at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  const at::Tensor X = rows_of(x), W = w.detach().contiguous(), B = b.detach().contiguous();
  const int64_t rows = X.size(0), n = X.size(1);
  at::Tensor y = at::empty_like(X);
  const auto xa = X.accessor<double, 2>();
  const auto wa = W.accessor<double, 1>();
  const auto ba = B.accessor<double, 1>();
  auto ya = y.accessor<double, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0;
    for (int64_t i = 0; i < n; ++i) mean += xa[r][i];
    mean /= double(n);
    double var = 0;
    for (int64_t i = 0; i < n; ++i) var += (xa[r][i] - mean) * (xa[r][i] - mean);
    var /= double(n);
    for (int64_t i = 0; i < n; ++i)
      ya[r][i] = (xa[r][i] - mean) / std::sqrt(var + eps) * wa[i] + ba[i];
  }
  return y.view(x.sizes());
}

// Causal multi-head self-attention: qkv = x Wqkv^T + bqkv holds per position
// q, k, v, each heads x head_dim; for query i and head h,
//   p_ij = softmax_j(q_i . k_j / sqrt(head_dim)) over the keys j <= i,
//   o_i  = sum_j p_ij v_j,
// then out = proj(o with the heads side by side). x [batch, seq, hidden].
inline at::Tensor causal_attention(const at::Tensor& x, const at::Tensor& w_qkv, const at::Tensor& b_qkv,
                                   const at::Tensor& w_proj, const at::Tensor& b_proj, int64_t heads) {
  const int64_t batch = x.size(0), seq = x.size(1), hidden = x.size(2), d = hidden / heads;
  const at::Tensor qkv = formula::linear(x, w_qkv, b_qkv).contiguous();
  const auto a = qkv.accessor<double, 3>();
  at::Tensor o = at::zeros({batch, seq, hidden}, at::kDouble);
  auto oa = o.accessor<double, 3>();
  const double scale = 1.0 / std::sqrt(double(d));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t q0 = h * d, k0 = hidden + h * d, v0 = 2 * hidden + h * d;
      for (int64_t i = 0; i < seq; ++i) {
        std::vector<double> score(i + 1);
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {  // the future (j > i) is masked: no term at all
          double s = 0;
          for (int64_t e = 0; e < d; ++e) s += a[b][i][q0 + e] * a[b][j][k0 + e];
          score[j] = s * scale;
          max = std::max(max, score[j]);
        }
        double total = 0;
        for (int64_t j = 0; j <= i; ++j) total += (score[j] = std::exp(score[j] - max));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t e = 0; e < d; ++e) oa[b][i][q0 + e] += score[j] / total * a[b][j][v0 + e];
      }
    }
  }
  return formula::linear(o, w_proj, b_proj);
}

// The MLP: fc2(gelu(fc1(x))).
inline at::Tensor mlp(const at::Tensor& x, const at::Tensor& w1, const at::Tensor& b1, const at::Tensor& w2,
                      const at::Tensor& b2) {
  return formula::linear(formula::gelu(formula::linear(x, w1, b1)), w2, b2);
}

// The pre-norm transformer block whose parameters are params[prefix + local name]
// (TransformerBlock's names): h = x + attention(attn_norm(x)), h + mlp(mlp_norm(h)).
inline at::Tensor block(const at::Tensor& x, const torch::OrderedDict<std::string, at::Tensor>& params,
                        const std::string& prefix, int64_t heads, double eps) {
  const auto p = [&](const char* name) { return params[prefix + name].detach(); };
  const at::Tensor a = formula::causal_attention(formula::layer_norm(x, p("attn_norm.weight"), p("attn_norm.bias"), eps),
                                        p("attention.qkv.weight"), p("attention.qkv.bias"),
                                        p("attention.proj.weight"), p("attention.proj.bias"), heads);
  const at::Tensor h = x + a;
  return h + formula::mlp(formula::layer_norm(h, p("mlp_norm.weight"), p("mlp_norm.bias"), eps), p("mlp.fc1.weight"),
                 p("mlp.fc1.bias"), p("mlp.fc2.weight"), p("mlp.fc2.bias"));
}

// Mean token cross entropy: over all tokens t, log sum_v exp(l_tv) - l_t,label_t.
inline double mean_cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
  const at::Tensor L = rows_of(logits);
  const at::Tensor y = labels.reshape({-1}).contiguous();
  const auto la = L.accessor<double, 2>();
  const auto ya = y.accessor<int64_t, 1>();
  double sum = 0;
  for (int64_t t = 0; t < L.size(0); ++t) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < L.size(1); ++v) max = std::max(max, la[t][v]);
    double z = 0;
    for (int64_t v = 0; v < L.size(1); ++v) z += std::exp(la[t][v] - max);
    sum += max + std::log(z) - la[t][ya[t]];
  }
  return sum / double(L.size(0));
}

// Sets every parameter of m to seeded random values, far from the regular
// placeholders and initial values (ones, zeros, log(1..N)) so that every term
// of a formula shows in the output: norm weights 1 + 0.3 N(0, 1), everything
// else 0.5 N(0, 1).
inline void randomize_parameters(torch::nn::Module& m, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  at::NoGradGuard no_grad;
  for (auto& p : m.named_parameters()) {
    const at::Tensor noise = at::randn(p.value().sizes(), gen, at::TensorOptions().dtype(at::kDouble));
    const bool norm_weight = p.key().size() >= 11 && p.key().compare(p.key().size() - 11, 11, "norm.weight") == 0;
    p.value().copy_(norm_weight ? 1.0 + 0.3 * noise : 0.5 * noise);
  }
}

// EXPECT that actual equals expected within tol (absolute and relative),
// naming the largest difference.
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, double tol, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const at::Tensor a = actual.detach().to(at::kDouble), e = expected.to(at::kDouble);
  EXPECT_TRUE(at::allclose(a, e, tol, tol))
      << what << ": largest difference " << (a - e).abs().max().item<double>() << " (tolerance " << tol << ")";
}

}  // namespace hp::model::formula
