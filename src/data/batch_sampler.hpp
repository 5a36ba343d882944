// Deterministic batches: the batch of a step depends only on (seed, step), so
// every rank reads the same batch without communication, and a resumed run
// reads exactly the batches it would have read.
#pragma once

#include <cstdint>
#include <vector>

#include "data/token_source.hpp"

namespace hp::data {

struct BatchOptions {
  int batch_size = 8;  // sequences per step (all micro-batches together)
  int seq_len = 32;
  std::uint64_t seed = 1234;
};

// Row-major [batch_size, seq_len + 1] token ids: inputs are [:, :-1], labels [:, 1:].
struct Batch {
  int batch_size = 0;
  int seq_len = 0;
  std::vector<std::int64_t> tokens;
  std::int64_t tokens_read = 0;  // taken from the source (the rows read)
};

// Throws std::invalid_argument when the source is shorter than seq_len + 1.
// With `rows` (batch_size flags), only the rows flagged are read from the
// source; the others stay 0. Every row's position is drawn either way, so a
// row holds the same tokens whichever rows are read.
Batch sample_batch(const TokenSource& src, const BatchOptions& o, std::int64_t step,
                   const std::vector<bool>* rows = nullptr);

}  // namespace hp::data
