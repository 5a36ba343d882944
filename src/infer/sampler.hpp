// Sampler: the next token of each row from its logits. Greedy (the arg max,
// the lowest id on ties) when temperature is 0, else a draw from
// softmax(logits / temperature) restricted to the top_k largest (0 = all).
// Draws come from one CPU generator seeded once, so the same logits in the
// same order give the same tokens on any pipeline layout. Not thread-safe.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hp::infer {

struct SamplingOptions {
  double temperature = 0.0;  // --temperature; 0 = greedy
  int top_k = 0;             // --top-k; 0 = every token
  std::uint64_t seed = 1234; // --seed

  // Throws std::invalid_argument naming the option (temperature, top_k).
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions options);
  // logits [rows, vocab] -> int64 token ids [rows].
  at::Tensor next(const at::Tensor& logits);

 private:
  SamplingOptions options_;
  at::Generator generator_;
};

}  // namespace hp::infer
