#include "model/fused_attention.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace hp::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// BLAS's Fortran gemm: C = alpha op(A) op(B) + beta C, column-major.
template <class T>
using BlasGemm = void (*)(const char*, const char*, const int*, const int*, const int*, const T*, const T*,
                          const int*, const T*, const int*, const T*, T*, const int*);

// The process's sgemm_ or dgemm_, found at run time: LibTorch calls the same
// one (Debian's links libblas.so.3), and a LibTorch with its BLAS built in
// and hidden simply has none, so the attention is composed there.
template <class T>
BlasGemm<T> blas_gemm() {
  static const auto fn =
      reinterpret_cast<BlasGemm<T>>(dlsym(RTLD_DEFAULT, std::is_same_v<T, float> ? "sgemm_" : "dgemm_"));
  return fn;
}

// C = alpha op(A) op(B) + beta C for row-major matrices with row strides
// lda, ldb, ldc: the column-major product of the transposes, C^T = op(B)^T op(A)^T.
template <class T>
void gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, int lda, const T* b, int ldb,
          T beta, T* c, int ldc) {
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  blas_gemm<T>()(&tb, &ta, &n, &m, &k, &alpha, b, &ldb, a, &lda, &beta, c, &ldc);
}

// The layout of one call: pair p = batch item p / heads, head p % heads.
struct Shape {
  int64_t batch, seq, heads, head_dim;
  int qkv_row() const { return int(3 * heads * head_dim); }  // a position's q, k, v
  int out_row() const { return int(heads * head_dim); }
  int64_t pairs() const { return batch * heads; }
  // Pairs per thread at least: about a million multiply-adds each, so that
  // small attentions (the default model's, a few microseconds a pair) run on
  // the calling thread and do not pay for waking the others.
  int64_t grain() const { return std::max<int64_t>(1, (int64_t(1) << 20) / (seq * seq * head_dim)); }
  // Offset of pair p's q in a qkv-shaped tensor (k and v follow at out_row()).
  int64_t qkv_offset(int64_t p) const { return (p / heads) * seq * qkv_row() + (p % heads) * head_dim; }
  int64_t out_offset(int64_t p) const { return (p / heads) * seq * out_row() + (p % heads) * head_dim; }
  template <class T>
  T scale() const {
    return T(1) / std::sqrt(T(head_dim));
  }
};

// Pair p's q, k and v (or their gradients) in a qkv-shaped buffer: each
// [seq, head_dim] with row stride qkv_row().
template <class T>
struct PairQkv {
  T *q, *k, *v;
};

template <class T>
PairQkv<T> pair_qkv(const Shape& s, T* base, int64_t p) {
  T* q = base + s.qkv_offset(p);
  return {q, q + s.out_row(), q + 2 * s.out_row()};
}

Shape shape_of(const at::Tensor& qkv, int64_t heads, int64_t head_dim) {
  TORCH_CHECK(qkv.dim() == 3 && qkv.size(2) == 3 * heads * head_dim, "fused attention: qkv must be [batch, seq, ",
              3 * heads * head_dim, "], got ", qkv.sizes());
  return {qkv.size(0), qkv.size(1), heads, head_dim};
}

// BLAS takes int sizes and strides, and a pair's offsets are ints here: the
// largest is under seq * max(seq, 3 * heads * head_dim).
bool fits_blas_ints(const at::Tensor& qkv) {
  const int64_t seq = qkv.size(1), row = qkv.size(2);
  return seq * std::max(seq, row) <= std::numeric_limits<int>::max();
}

// Rows of the score matrix per block: a block of queries needs the keys up
// to its last row only, so the products skip the blocks above the diagonal
// (3/4 of the work at seq 128, about half at long sequences) at a size where
// the BLAS still runs near its full rate.
constexpr int kBlock = 64;

template <class Body>
void for_each_pair(const Shape& s, const Body& body) {
  at::parallel_for(0, s.pairs(), s.grain(), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) body(p);
  });
}

// Each pair's probabilities softmax(q k^T * scale + causal mask) into probs
// [pairs, seq, seq] (0 above the diagonal) and its output probs v into out
// [batch, seq, heads * head_dim].
template <class T>
void forward_pairs(const Shape& s, const at::Tensor& qkv, const at::Tensor& scores, const at::Tensor& probs,
                   const at::Tensor& out) {
  const int seq = int(s.seq), d = int(s.head_dim), row = s.qkv_row(), out_row = s.out_row();
  const T scale = s.scale<T>();
  for_each_pair(s, [&](int64_t p) {
    const auto [q, k, v] = pair_qkv<const T>(s, qkv.data_ptr<T>(), p);
    T* sc = scores.data_ptr<T>() + p * seq * seq;
    for (int r0 = 0; r0 < seq; r0 += kBlock) {
      const int r1 = std::min(seq, r0 + kBlock);
      gemm<T>(false, true, r1 - r0, r1, d, scale, q + r0 * row, row, k, row, T(0), sc + r0 * seq, seq);
      for (int i = r0; i < r1; ++i)
        std::fill(sc + i * seq + i + 1, sc + (i + 1) * seq, -std::numeric_limits<T>::infinity());
    }
    at::Tensor pair_probs = probs.select(0, p);
    at::_softmax_out(pair_probs, scores.select(0, p), -1, false);
    const T* pr = pair_probs.data_ptr<T>();
    T* o = out.data_ptr<T>() + s.out_offset(p);
    for (int r0 = 0; r0 < seq; r0 += kBlock) {
      const int r1 = std::min(seq, r0 + kBlock);
      gemm<T>(false, false, r1 - r0, d, r1, T(1), pr + r0 * seq, seq, v, row, T(0), o + r0 * out_row, out_row);
    }
  });
}

// qkv's gradient from the output's: per pair dP = dO v^T, dS = softmax's
// backward of dP, dq = dS k * scale, dk = dS^T q * scale, dv = P^T dO, each
// over the blocks on and below the diagonal.
template <class T>
void backward_pairs(const Shape& s, const at::Tensor& qkv, const at::Tensor& probs, const at::Tensor& grad_out,
                    const at::Tensor& grad_probs, const at::Tensor& grad_scores, const at::Tensor& grad_qkv) {
  const int seq = int(s.seq), d = int(s.head_dim), row = s.qkv_row(), out_row = s.out_row();
  const T scale = s.scale<T>();
  for_each_pair(s, [&](int64_t p) {
    const auto [q, k, v] = pair_qkv<const T>(s, qkv.data_ptr<T>(), p);
    const auto [dq, dk, dv] = pair_qkv(s, grad_qkv.data_ptr<T>(), p);
    const T* dout = grad_out.data_ptr<T>() + s.out_offset(p);
    const T* pr = probs.data_ptr<T>() + p * seq * seq;
    T* dp = grad_probs.data_ptr<T>() + p * seq * seq;
    for (int r0 = 0; r0 < seq; r0 += kBlock) {
      const int r1 = std::min(seq, r0 + kBlock);
      gemm<T>(false, true, r1 - r0, r1, d, T(1), dout + r0 * out_row, out_row, v, row, T(0), dp + r0 * seq, seq);
      // Where P is 0 the softmax's backward gives 0 for any finite dP.
      for (int i = r0; i < r1; ++i) std::fill(dp + i * seq + r1, dp + (i + 1) * seq, T(0));
    }
    at::Tensor pair_grad_scores = grad_scores.select(0, p);
    at::_softmax_backward_data_out(pair_grad_scores, grad_probs.select(0, p), probs.select(0, p), -1,
                                   probs.scalar_type());
    const T* ds = pair_grad_scores.data_ptr<T>();
    for (int r0 = 0; r0 < seq; r0 += kBlock) {
      const int r1 = std::min(seq, r0 + kBlock), rows = r1 - r0, below = seq - r0;
      gemm<T>(false, false, rows, d, r1, scale, ds + r0 * seq, seq, k, row, T(0), dq + r0 * row, row);
      // Keys r0..r1 are seen by queries r0 and later.
      gemm<T>(true, false, rows, d, below, scale, ds + r0 * seq + r0, seq, q + r0 * row, row, T(0), dk + r0 * row,
              row);
      gemm<T>(true, false, rows, d, below, T(1), pr + r0 * seq + r0, seq, dout + r0 * out_row, out_row, T(0),
              dv + r0 * row, row);
    }
  });
}

struct FusedCausalAttention : torch::autograd::Function<FusedCausalAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv_in, int64_t heads, int64_t head_dim) {
    const at::Tensor qkv = qkv_in.contiguous();
    const Shape s = shape_of(qkv, heads, head_dim);
    const at::Tensor probs = at::empty({s.pairs(), s.seq, s.seq}, qkv.options());
    const at::Tensor out = at::empty({s.batch, s.seq, heads * head_dim}, qkv.options());
    {
      const at::Tensor scores = at::empty_like(probs);
      AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "fused_causal_attention",
                                 [&] { forward_pairs<scalar_t>(s, qkv, scores, probs, out); });
    }
    ctx->save_for_backward({qkv, probs});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["head_dim"] = head_dim;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &qkv = saved[0], &probs = saved[1];
    const Shape s = shape_of(qkv, ctx->saved_data["heads"].toInt(), ctx->saved_data["head_dim"].toInt());
    const at::Tensor grad_out = grads[0].contiguous();
    const at::Tensor grad_qkv = at::empty_like(qkv);
    const at::Tensor grad_probs = at::empty_like(probs), grad_scores = at::empty_like(probs);
    AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "fused_causal_attention_backward", [&] {
      backward_pairs<scalar_t>(s, qkv, probs, grad_out, grad_probs, grad_scores, grad_qkv);
    });
    return {grad_qkv, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool fused_attention_supports(const at::Tensor& qkv) {
  if (!qkv.device().is_cpu() || qkv.layout() != at::kStrided || qkv.dim() != 3 || !fits_blas_ints(qkv)) return false;
  if (qkv.scalar_type() == at::kFloat) return blas_gemm<float>() != nullptr;
  if (qkv.scalar_type() == at::kDouble) return blas_gemm<double>() != nullptr;
  return false;
}

at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t heads, int64_t head_dim) {
  TORCH_CHECK(fused_attention_supports(qkv),
              "fused attention: needs a CPU float or double [batch, seq, 3 * heads * head_dim] tensor with seq * "
              "max(seq, 3 * heads * head_dim) within BLAS's int, and a BLAS; got ",
              qkv.toString(), " ", qkv.sizes());
  return FusedCausalAttention::apply(qkv, heads, head_dim);
}

}  // namespace hp::model
