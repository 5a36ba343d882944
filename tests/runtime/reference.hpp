// The correctness oracle of DESIGN.md section 4: the same model's
// single-process, no-pipelining step on the same micro-batches.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <string>
#include <vector>

#include "model/gpt.hpp"
#include "model/lm_loss.hpp"
#include "runtime/pipeline.hpp"

namespace hp::testing {

// A 4-layer double-precision GPT small enough for exhaustive layout tests.
inline model::TransformerConfig tiny_gpt_config(bool tie, std::uint64_t seed) {
  model::TransformerConfig c;
  c.num_layers = 4;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.vocab_size = 32;
  c.max_seq_len = 8;
  c.tie_embeddings = tie;
  c.dtype = model::DType::Float64;
  c.seed = seed;
  return c;
}

struct ReferenceStep {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;
};

inline ReferenceStep reference_step(const model::TransformerConfig& cfg, const std::vector<at::Tensor>& micro_tokens) {
  auto ref = model::build_reference_gpt(cfg);
  ref->set_mtp_grad_scale(1.0 / static_cast<double>(micro_tokens.size()));
  std::int64_t tokens = 0;
  for (const auto& t : micro_tokens) tokens += t.size(0) * (t.size(1) - 1);
  ReferenceStep out;
  for (const auto& t : micro_tokens) {
    const auto n = t.size(1);
    at::Tensor labels = t.slice(1, 1, n);
    at::Tensor logits = ref->forward_with_target(t.slice(1, 0, n - 1), labels);
    at::Tensor loss = model::lm_loss(logits, labels) * (static_cast<double>(labels.numel()) / tokens);
    torch::autograd::backward({loss});
    out.loss += loss.item<double>();
  }
  for (const auto& p : ref->named_parameters()) out.grads[p.key()] = p.value().grad().clone();
  return out;
}

// Deterministic token micro-batches: `rows` per micro, sequence lengths from
// seq_lens (cycled), values in [0, vocab).
inline std::vector<at::Tensor> make_micro_tokens(int micro_batches, int rows, std::vector<int> seq_lens, int vocab,
                                                 std::uint64_t seed) {
  std::vector<at::Tensor> out;
  auto gen = at::detail::createCPUGenerator(seed);
  for (int m = 0; m < micro_batches; ++m) {
    const int seq = seq_lens[m % seq_lens.size()];
    out.push_back(at::randint(vocab, {rows, seq + 1}, gen, at::TensorOptions().dtype(at::kLong)));
  }
  return out;
}

// What rank p.rank() reads of the micro-batches (spec D4): the inputs of
// p.input_micros(), the targets where p.reads_targets(); the rest cleared, so
// a runtime that touches data its rank does not read fails.
inline std::vector<runtime::MicroBatch> rank_share(const runtime::Pipeline& p, std::vector<runtime::MicroBatch> micros) {
  std::vector<bool> read(micros.size(), false);
  for (int m : p.input_micros()) read.at(m) = true;
  for (size_t m = 0; m < micros.size(); ++m) {
    if (!read[m]) micros[m].input = at::Tensor();
    if (!p.reads_targets()) micros[m].target = at::Tensor();
  }
  return micros;
}

// Largest |a - b| / (1 + |b|) over every element.
inline double max_rel_error(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs() / (b.abs() + 1)).max().item<double>();
}

// Largest |a - b| relative to the largest |b|, for tensors far below 1
// (down to 1e-6, below which double rounding of O(1) terms shows).
inline double max_scaled_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / (b.abs().max().item<double>() + 1e-6);
}

}  // namespace hp::testing
