#include "data/batch_sampler.hpp"

#include <stdexcept>
#include <string>

#include "data/rng.hpp"

namespace hp::data {

Batch sample_batch(const TokenSource& src, const BatchOptions& o, std::int64_t step, const std::vector<bool>* rows) {
  if (rows && rows->size() != static_cast<std::size_t>(o.batch_size))
    throw std::invalid_argument("sample_batch: " + std::to_string(rows->size()) + " row flags for a batch of " +
                                std::to_string(o.batch_size));
  const std::size_t window = static_cast<std::size_t>(o.seq_len) + 1;
  if (src.size() < window)
    throw std::invalid_argument("data.seq_len " + std::to_string(o.seq_len) + ": the data (" + src.describe() +
                                ") has only " + std::to_string(src.size()) + " tokens; need at least seq-len + 1");
  Batch b;
  b.batch_size = o.batch_size;
  b.seq_len = o.seq_len;
  b.tokens.resize(static_cast<std::size_t>(o.batch_size) * window);
  SplitMix64 rng(o.seed * 0x100000001b3ULL + static_cast<std::uint64_t>(step));
  const std::size_t starts = src.size() - window + 1;
  for (int i = 0; i < o.batch_size; ++i) {
    const std::size_t start = rng.next() % starts;
    if (rows && !(*rows)[static_cast<std::size_t>(i)]) continue;
    b.tokens_read += static_cast<std::int64_t>(window);
    for (std::size_t j = 0; j < window; ++j) b.tokens[i * window + j] = src.at(start + j);
  }
  return b;
}

}  // namespace hp::data
