#include "data/gpt_dataset.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "data/indexed_dataset.hpp"
#include "data/rng.hpp"

namespace hp::data {

// One epoch's layout: the sequences in their shuffled order, where each
// starts in the epoch's token stream, and the order its samples are visited.
struct GptDataset::Epoch {
  std::uint64_t seed;
  std::int64_t index;
  std::vector<std::int64_t> sequences;
  std::vector<std::int64_t> starts;  // sequences.size() + 1 prefix sums of the lengths
  std::vector<std::int64_t> visit;   // sample order
};

namespace {

void shuffle(std::vector<std::int64_t>& v, SplitMix64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.next() % i]);
}

}  // namespace

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> dataset, std::size_t first, std::size_t last,
                       int seq_len, std::string part)
    : dataset_(std::move(dataset)), documents_(last - first), seq_len_(seq_len), part_(std::move(part)) {
  if (seq_len_ < 1) throw std::invalid_argument("data.seq_len must be >= 1, got " + std::to_string(seq_len_));
  first_sequence_ = dataset_->document_start(first);
  last_sequence_ = dataset_->document_start(last);
  for (std::int64_t s = first_sequence_; s < last_sequence_; ++s) tokens_ += dataset_->length(static_cast<std::size_t>(s));
  samples_per_epoch_ = tokens_ > 0 ? (tokens_ - 1) / seq_len_ : 0;
  if (samples_per_epoch_ < 1)
    throw std::invalid_argument("data.data " + dataset_->prefix() + ": the " + part_ + " split's " +
                                std::to_string(documents_) + " documents hold " + std::to_string(tokens_) +
                                " tokens; seq-len " + std::to_string(seq_len_) + " needs at least " +
                                std::to_string(seq_len_ + 1));
}

GptDataset::~GptDataset() = default;

std::shared_ptr<const GptDataset::Epoch> GptDataset::epoch(std::uint64_t seed, std::int64_t e) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (newest_ && newest_->seed == seed && newest_->index == e) return newest_;
  auto ep = std::make_shared<Epoch>();
  ep->seed = seed;
  ep->index = e;
  ep->sequences.resize(static_cast<std::size_t>(last_sequence_ - first_sequence_));
  std::iota(ep->sequences.begin(), ep->sequences.end(), first_sequence_);
  SplitMix64 documents_rng(seed * 0x2545f4914f6cdd1dULL ^ static_cast<std::uint64_t>(e) * 0x9e3779b97f4a7c15ULL ^ 0x646f6373);
  shuffle(ep->sequences, documents_rng);
  ep->starts.resize(ep->sequences.size() + 1, 0);
  for (std::size_t k = 0; k < ep->sequences.size(); ++k)
    ep->starts[k + 1] = ep->starts[k] + dataset_->length(static_cast<std::size_t>(ep->sequences[k]));
  ep->visit.resize(static_cast<std::size_t>(samples_per_epoch_));
  std::iota(ep->visit.begin(), ep->visit.end(), 0);
  SplitMix64 samples_rng(seed * 0x2545f4914f6cdd1dULL ^ static_cast<std::uint64_t>(e) * 0x9e3779b97f4a7c15ULL ^ 0x73616d70);
  shuffle(ep->visit, samples_rng);
  newest_ = ep;
  return ep;
}

void GptDataset::sample(std::uint64_t seed, std::int64_t i, std::size_t window, std::int64_t* out) const {
  const auto ep = epoch(seed, i / samples_per_epoch_);
  const std::int64_t start = ep->visit[static_cast<std::size_t>(i % samples_per_epoch_)] * seq_len_;
  std::size_t k = static_cast<std::size_t>(std::upper_bound(ep->starts.begin(), ep->starts.end(), start) -
                                           ep->starts.begin() - 1);
  std::int64_t offset = start - ep->starts[k];
  for (std::size_t n = 0; n < window; ++n) {
    while (offset >= dataset_->length(static_cast<std::size_t>(ep->sequences[k]))) {
      ++k;
      offset = 0;
    }
    out[n] = dataset_->token(static_cast<std::size_t>(ep->sequences[k]), static_cast<std::size_t>(offset++));
  }
}

std::int64_t GptDataset::vocab_size() const { return dataset_->vocab_size(); }

std::string GptDataset::describe() const {
  return dataset_->prefix() + " (" + part_ + " split: " + std::to_string(documents_) + " documents, " +
         std::to_string(tokens_) + " tokens, " + std::to_string(samples_per_epoch_) + " samples an epoch)";
}

}  // namespace hp::data
