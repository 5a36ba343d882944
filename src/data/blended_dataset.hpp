// Megatron's BlendedDataset: a weighted mix of sampled corpora. Sample i is
// sample n_i of part d_i, where d_i is chosen greedily so that every prefix of
// the stream follows the weights as closely as it can (Megatron's
// build_blending_indices): d_i = argmax_d w_d * max(i, 1) - taken_d, the
// first on a tie. Deterministic without a seed; the parts use the batch's.
// Thread-safe: the choices are computed once, as far as they are read.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "data/corpus.hpp"

namespace hp::data {

class BlendedDataset final : public SampledCorpus {
 public:
  // Weights > 0, one per part (normalised here). Throws std::invalid_argument
  // on a count mismatch or a weight <= 0.
  BlendedDataset(std::vector<double> weights, std::vector<std::shared_ptr<const SampledCorpus>> parts);

  void sample(std::uint64_t seed, std::int64_t i, std::size_t window, std::int64_t* out) const override;
  std::int64_t vocab_size() const override;
  std::size_t longest_row() const override;
  std::string describe() const override;
  // Which part sample i comes from, and its number there.
  std::pair<std::size_t, std::int64_t> source_of(std::int64_t i) const;

 private:
  std::vector<double> weights_;
  std::vector<std::shared_ptr<const SampledCorpus>> parts_;
  mutable std::mutex mutex_;
  mutable std::vector<std::uint32_t> part_of_;   // d_i for the samples chosen so far
  mutable std::vector<std::int64_t> number_of_;  // n_i
  mutable std::vector<std::int64_t> taken_;      // per part
};

}  // namespace hp::data
