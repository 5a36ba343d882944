// The VL model's single-process, no-pipelining step (the correctness oracle
// of DESIGN.md section 4 for --model vl): the whole vision tower and
// projector, then the text model over [patches; caption], loss over the caption.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <string>
#include <vector>

#include "model/gpt.hpp"
#include "model/lm_loss.hpp"
#include "model/vision.hpp"
#include "runtime/reference.hpp"

namespace hp::testing {

// Frozen tower parameters have no gradient and are absent from grads.
inline ReferenceStep vl_reference_step(const model::TransformerConfig& text, const model::VisionConfig& vision,
                                       const std::vector<at::Tensor>& captions, const std::vector<at::Tensor>& images) {
  auto tower = std::make_shared<model::VisionTower>(vision, text, 0, vision.num_layers);
  auto gpt = model::build_reference_gpt(text);
  std::int64_t tokens = 0;
  for (const auto& c : captions) tokens += c.size(0) * (c.size(1) - 1);
  ReferenceStep out;
  for (size_t m = 0; m < captions.size(); ++m) {
    const auto n = captions[m].size(1);
    const at::Tensor labels = captions[m].slice(1, 1, n);
    at::Tensor logits = gpt->forward(captions[m].slice(1, 0, n - 1), tower->forward(images[m]));
    at::Tensor loss = model::lm_loss(logits.narrow(1, logits.size(1) - (n - 1), n - 1), labels) *
                      (static_cast<double>(labels.numel()) / tokens);
    torch::autograd::backward({loss});
    out.loss += loss.item<double>();
  }
  for (const auto& p : gpt->named_parameters()) out.grads[p.key()] = p.value().grad().clone();
  for (const auto& [name, p] : tower->global_parameters())
    if (p.grad().defined()) out.grads[name] = p.grad().clone();
  return out;
}

}  // namespace hp::testing
