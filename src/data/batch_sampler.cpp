#include "data/batch_sampler.hpp"

#include <stdexcept>
#include <string>

#include "data/rng.hpp"

namespace hp::data {

Batch sample_batch(const TokenSource& src, const BatchOptions& o, std::int64_t step) {
  const std::size_t window = static_cast<std::size_t>(o.seq_len) + 1;
  if (src.size() < window)
    throw std::invalid_argument("--seq-len " + std::to_string(o.seq_len) + ": the data (" + src.describe() +
                                ") has only " + std::to_string(src.size()) + " tokens; need at least seq-len + 1");
  Batch b;
  b.batch_size = o.batch_size;
  b.seq_len = o.seq_len;
  b.tokens.resize(static_cast<std::size_t>(o.batch_size) * window);
  SplitMix64 rng(o.seed * 0x100000001b3ULL + static_cast<std::uint64_t>(step));
  const std::size_t starts = src.size() - window + 1;
  for (int i = 0; i < o.batch_size; ++i) {
    const std::size_t start = rng.next() % starts;
    for (std::size_t j = 0; j < window; ++j) b.tokens[i * window + j] = src.at(start + j);
  }
  return b;
}

}  // namespace hp::data
