#include "data/corpus.hpp"

#include <stdexcept>

#include "data/token_source.hpp"

namespace hp::data {

Batch SampledCorpus::batch(const BatchOptions& o, std::int64_t step, const std::vector<bool>* rows) const {
  if (rows && rows->size() != static_cast<std::size_t>(o.batch_size))
    throw std::invalid_argument("SampledCorpus::batch: " + std::to_string(rows->size()) + " row flags for a batch of " +
                                std::to_string(o.batch_size));
  const std::size_t window = static_cast<std::size_t>(o.seq_len) + 1;
  if (window > longest_row())
    throw std::invalid_argument("data.seq_len " + std::to_string(o.seq_len) + ": the samples of " + describe() +
                                " hold " + std::to_string(longest_row()) + " tokens; need seq-len + 1");
  Batch b;
  b.batch_size = o.batch_size;
  b.seq_len = o.seq_len;
  b.tokens.resize(static_cast<std::size_t>(o.batch_size) * window);
  for (int r = 0; r < o.batch_size; ++r) {
    if (rows && !(*rows)[static_cast<std::size_t>(r)]) continue;
    sample(o.seed, step * o.batch_size + r, window, b.tokens.data() + r * window);
    b.tokens_read += static_cast<std::int64_t>(window);
  }
  return b;
}

namespace {

class RandomWindows final : public Corpus {
 public:
  explicit RandomWindows(std::shared_ptr<const TokenSource> source) : source_(std::move(source)) {}
  Batch batch(const BatchOptions& o, std::int64_t step, const std::vector<bool>* rows) const override {
    return sample_batch(*source_, o, step, rows);
  }
  std::int64_t vocab_size() const override { return source_->vocab_size(); }
  std::size_t longest_row() const override { return source_->size(); }
  std::string describe() const override { return source_->describe(); }

 private:
  std::shared_ptr<const TokenSource> source_;
};

}  // namespace

std::unique_ptr<Corpus> random_windows(std::shared_ptr<const TokenSource> source) {
  return std::make_unique<RandomWindows>(std::move(source));
}

}  // namespace hp::data
