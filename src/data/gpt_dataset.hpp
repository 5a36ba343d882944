// Megatron's GPTDataset over a range of an indexed dataset's documents. Each
// epoch lays the documents out back to back in a shuffled order (each ends
// with the end-of-document token when preprocess_data.py appended one), cuts
// that stream into samples of seq_len + 1 tokens that overlap by one token
// (sample k starts at token k * seq_len, so samples cross document
// boundaries), and visits the samples in a shuffled order. Epochs follow one
// another without end. Epoch e's two orders are drawn from (seed, e) with
// SplitMix64; Megatron draws them with numpy, so its orders differ, not the
// structure. Thread-safe; the newest epoch's orders are cached.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/corpus.hpp"

namespace hp::data {

class IndexedDataset;

class GptDataset final : public SampledCorpus {
 public:
  // Documents [first, last) of `dataset`; `part` names them in messages
  // ("train", "validation", "test"). Throws std::invalid_argument naming
  // data.data when they hold fewer than seq_len + 1 tokens.
  GptDataset(std::shared_ptr<const IndexedDataset> dataset, std::size_t first, std::size_t last, int seq_len,
             std::string part);
  ~GptDataset() override;

  void sample(std::uint64_t seed, std::int64_t i, std::size_t window, std::int64_t* out) const override;
  std::int64_t vocab_size() const override;
  std::size_t longest_row() const override { return static_cast<std::size_t>(seq_len_) + 1; }
  std::string describe() const override;
  std::int64_t samples_per_epoch() const { return samples_per_epoch_; }
  std::int64_t tokens_per_epoch() const { return tokens_; }

 private:
  struct Epoch;
  std::shared_ptr<const Epoch> epoch(std::uint64_t seed, std::int64_t e) const;

  std::shared_ptr<const IndexedDataset> dataset_;
  std::int64_t first_sequence_, last_sequence_;
  std::size_t documents_;
  int seq_len_;
  std::string part_;
  std::int64_t tokens_ = 0, samples_per_epoch_ = 0;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const Epoch> newest_;
};

}  // namespace hp::data
