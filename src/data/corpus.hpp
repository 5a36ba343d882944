// A Corpus is what training batches are drawn from. Batch `step` depends only
// on (seed, step), so every rank reads the same batch without communication
// and a resumed run reads exactly the batches it would have read. Reads are
// const and thread-safe.
//
// Two kinds: random windows of a token stream (embedded, text and token files:
// data/token_source.hpp), and numbered samples (Megatron's GPT samples over an
// indexed dataset's documents, and blends of them: data/gpt_dataset.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_sampler.hpp"

namespace hp::data {

class Corpus {
 public:
  virtual ~Corpus() = default;
  // o.batch_size rows of o.seq_len + 1 tokens. With `rows`, only the flagged
  // rows are read (the others stay 0), and a row holds the same tokens
  // whichever rows are read. Throws std::invalid_argument when the corpus
  // cannot fill a row.
  virtual Batch batch(const BatchOptions& o, std::int64_t step, const std::vector<bool>* rows) const = 0;
  // Smallest vocabulary that holds every token of the corpus.
  virtual std::int64_t vocab_size() const = 0;
  // The longest row it can fill, in tokens (seq_len + 1 at most this).
  virtual std::size_t longest_row() const = 0;
  virtual std::string describe() const = 0;
};

// A corpus of numbered samples: row r of batch `step` is sample
// step * batch_size + r, cut to seq_len + 1 tokens.
class SampledCorpus : public Corpus {
 public:
  Batch batch(const BatchOptions& o, std::int64_t step, const std::vector<bool>* rows) const final;
  // Writes the first `window` tokens of sample i (window <= longest_row()).
  virtual void sample(std::uint64_t seed, std::int64_t i, std::size_t window, std::int64_t* out) const = 0;
};

// Random windows of a token stream (data::sample_batch).
std::unique_ptr<Corpus> random_windows(std::shared_ptr<const TokenSource> source);

}  // namespace hp::data
