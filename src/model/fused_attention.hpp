// Causal self-attention as one operation on CPU: softmax(q k^T / sqrt(d) +
// causal mask) v for every (batch item, head) in parallel, each pair's
// products on one thread and its scores hot in cache from product to softmax
// to product. Composed of batched products (baddbmm, softmax, bmm), the same
// attention makes LibTorch's CPU bmm split into one two-thread BLAS call per
// pair (small products at about half the rate of the model's linear layers)
// and needs copies to bring q, k, v and the output into the batched layout
// and back. Here q, k and v are read where the qkv projection wrote them and
// the output and the gradient of qkv are written in the layout the next
// product reads.
//
// Contract: qkv is [batch, seq, 3 * heads * head_dim], per position q, k, v
// each as heads x head_dim (CausalSelfAttention's projection). The result is
// [batch, seq, heads * head_dim], heads side by side, equal to the composed
// attention up to the rounding of the products' sums (the same BLAS
// kernels, other blockings). Backward gives qkv's gradient; no higher-order
// gradients. fused_attention_supports says when the fused path runs: a CPU
// 3-d tensor of float or double whose seq * max(seq, 3 * heads * head_dim)
// fits BLAS's int, and a BLAS whose sgemm_/dgemm_ the process can call
// directly (Debian's libblas.so.3, reference or OpenBLAS); otherwise the
// caller composes the attention itself. Thread-safe as ATen operators are;
// the parallel loop is ATen's (at::parallel_for).
#pragma once

#include <ATen/core/Tensor.h>

namespace hp::model {

bool fused_attention_supports(const at::Tensor& qkv);

at::Tensor fused_causal_attention(const at::Tensor& qkv, int64_t heads, int64_t head_dim);

}  // namespace hp::model
