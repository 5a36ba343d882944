// The Mamba mixer (model/mamba.hpp, Mamba-1's selective SSM block) against
// its formulas written out step by step (the naive per-timestep recurrence of
// the Mamba paper, Gu & Dao 2023, Algorithm 2 with the block of its Figure 3),
// in double at 1e-12:
//   x, z  = in_proj(u)                       (no bias; x the first E channels, z the next E)
//   x'_t  = silu(b_conv + sum_k w_k x_{t-K+1+k})   (causal depthwise, zeros before t = 0)
//   dt_raw, B_t, C_t = x_proj(x')            (R, N, N; no bias)
//   dt_t  = softplus(dt_proj(dt_raw))        (with bias)
//   A     = -exp(A_log)
//   h_t   = exp(dt_t A) h_{t-1} + dt_t B_t x'_t,   h_{-1} = 0   (per channel c and state n)
//   y_t   = sum_n C_t,n h_t,n + D x'_t
//   out   = out_proj(y * silu(z))            (no bias)
// hybrid_test's SelectiveScan.EqualsANaiveLoop checks selective_scan alone
// against such a loop; this checks the whole mixer around it, and decoding
// through the cache.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "model/formulas.hpp"
#include "model/kv_cache.hpp"
#include "model/mamba.hpp"

namespace hp::model {
namespace {

using formula::expect_close;

using formula::kTol;

TransformerConfig mixer_config() {
  TransformerConfig c;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.dtype = DType::Float64;
  return c;
}

MambaOptions mixer_options() {
  MambaOptions o;
  o.state_size = 4;   // N
  o.conv_kernel = 3;  // K
  o.expand = 2;       // E = 16
  return o;
}

// The mixer by formula from its parameters p (MambaMixer's local names).
at::Tensor mixer_formula(const at::Tensor& u, const torch::OrderedDict<std::string, at::Tensor>& p, int64_t kernel) {
  const int64_t batch = u.size(0), seq = u.size(1);
  const at::Tensor A_log = p["A_log"].detach().contiguous();
  const int64_t inner = A_log.size(0), state = A_log.size(1);
  const int64_t rank = p["dt_proj.weight"].size(1);
  const at::Tensor xz = formula::linear(u, p["in_proj.weight"]).contiguous();
  const auto xza = xz.accessor<double, 3>();
  const at::Tensor conv_w = p["conv1d.weight"].detach().contiguous(), conv_b = p["conv1d.bias"].detach().contiguous();
  const auto wa = conv_w.accessor<double, 2>();
  const auto cba = conv_b.accessor<double, 1>();
  // Causal depthwise convolution of x, then silu.
  at::Tensor conv = at::empty({batch, seq, inner}, at::kDouble);
  auto ca = conv.accessor<double, 3>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t c = 0; c < inner; ++c) {
        double s = cba[c];
        for (int64_t k = 0; k < kernel; ++k) {
          const int64_t from = t - (kernel - 1) + k;
          if (from >= 0) s += wa[c][k] * xza[b][from][c];
        }
        ca[b][t][c] = s;
      }
  const at::Tensor x = formula::silu(conv).contiguous();
  at::Tensor z = at::empty({batch, seq, inner}, at::kDouble);
  auto za = z.accessor<double, 3>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t c = 0; c < inner; ++c) za[b][t][c] = xza[b][t][inner + c];
  // dt, B, C from x.
  const at::Tensor dbc = formula::linear(x, p["x_proj.weight"]).contiguous();
  const auto dbca = dbc.accessor<double, 3>();
  at::Tensor dt_raw = at::empty({batch, seq, rank}, at::kDouble);
  auto dra = dt_raw.accessor<double, 3>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t)
      for (int64_t r = 0; r < rank; ++r) dra[b][t][r] = dbca[b][t][r];
  const at::Tensor dt = formula::softplus(formula::linear(dt_raw, p["dt_proj.weight"], p["dt_proj.bias"])).contiguous();
  const auto dta = dt.accessor<double, 3>();
  const auto xa = x.accessor<double, 3>();
  const auto la = A_log.accessor<double, 2>();
  const at::Tensor D = p["D"].detach().contiguous();
  const auto da = D.accessor<double, 1>();
  // The recurrence, one step at a time.
  at::Tensor y = at::empty({batch, seq, inner}, at::kDouble);
  auto ya = y.accessor<double, 3>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < inner; ++c) {
      std::vector<double> h(state, 0.0);
      for (int64_t t = 0; t < seq; ++t) {
        double out = da[c] * xa[b][t][c];
        for (int64_t n = 0; n < state; ++n) {
          const double A = -std::exp(la[c][n]);
          const double B = dbca[b][t][rank + n], C = dbca[b][t][rank + state + n];
          h[n] = std::exp(dta[b][t][c] * A) * h[n] + dta[b][t][c] * B * xa[b][t][c];
          out += C * h[n];
        }
        ya[b][t][c] = out;
      }
    }
  return formula::linear(y * formula::silu(z), p["out_proj.weight"]);
}

TEST(MambaMixerFormula, EqualsTheSelectiveStateSpaceBlockWrittenOutStepByStep) {
  const auto c = mixer_config();
  MambaMixer mixer(c, mixer_options());
  // Mamba's own initial values are regular (A_log = log(1..N), D = 1):
  // random ones make every parameter and both state terms show.
  formula::randomize_parameters(mixer, 31);
  auto gen = at::detail::createCPUGenerator(32);
  const at::Tensor u = at::randn({2, 7, 8}, gen, at::TensorOptions().dtype(at::kDouble));
  expect_close(mixer.forward(u), mixer_formula(u, mixer.named_parameters(), 3), kTol, "mixer");
}

TEST(MambaMixerFormula, DecodingInStepsThroughTheCacheGivesTheFormulaOverTheWholeSequence) {
  // The convolution's window reaches back past each call's first position and
  // the scan starts from the cached state: both must carry over exactly.
  const auto c = mixer_config();
  MambaMixer mixer(c, mixer_options());
  formula::randomize_parameters(mixer, 33);
  auto gen = at::detail::createCPUGenerator(34);
  const at::Tensor u = at::randn({2, 7, 8}, gen, at::TensorOptions().dtype(at::kDouble));
  MambaCache cache;
  const at::Tensor steps = at::cat({mixer.forward(u.narrow(1, 0, 3), &cache), mixer.forward(u.narrow(1, 3, 1), &cache),
                                    mixer.forward(u.narrow(1, 4, 3), &cache)},
                                   1);
  expect_close(steps, mixer_formula(u, mixer.named_parameters(), 3), kTol, "decoded mixer");
}

}  // namespace
}  // namespace hp::model
