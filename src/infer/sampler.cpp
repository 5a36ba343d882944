#include "infer/sampler.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace hp::infer {

void SamplingOptions::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    throw std::invalid_argument("sampling.temperature must be a finite number >= 0 (0 = greedy), got " +
                                std::to_string(temperature));
  if (top_k < 0) throw std::invalid_argument("sampling.top_k must be >= 0 (0 = every token), got " + std::to_string(top_k));
}

Sampler::Sampler(SamplingOptions options)
    : options_(options), generator_(at::make_generator<at::CPUGeneratorImpl>(options.seed)) {
  options_.validate();
}

at::Tensor Sampler::next(const at::Tensor& logits) {
  if (logits.dim() != 2) throw std::invalid_argument("Sampler::next: logits must be [rows, vocab]");
  if (options_.temperature == 0) return logits.argmax(1);
  at::Tensor scaled = logits.to(at::kDouble) / options_.temperature;
  if (options_.top_k > 0 && options_.top_k < scaled.size(1)) {
    const at::Tensor kth = std::get<0>(scaled.topk(options_.top_k, 1)).narrow(1, options_.top_k - 1, 1);
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<double>::infinity());
  }
  return at::multinomial(at::softmax(scaled, 1), 1, /*replacement=*/false, generator_).squeeze(1);
}

}  // namespace hp::infer
