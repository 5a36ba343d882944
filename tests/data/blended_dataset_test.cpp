#include "data/blended_dataset.hpp"

#include <gtest/gtest.h>

namespace hp::data {
namespace {

// A corpus whose sample i is (id, i, i, ...).
class LabelledCorpus final : public SampledCorpus {
 public:
  explicit LabelledCorpus(std::int64_t id) : id_(id) {}
  void sample(std::uint64_t, std::int64_t i, std::size_t window, std::int64_t* out) const override {
    out[0] = id_;
    for (std::size_t j = 1; j < window; ++j) out[j] = i;
  }
  std::int64_t vocab_size() const override { return 1000; }
  std::size_t longest_row() const override { return 9; }
  std::string describe() const override { return "labelled"; }

 private:
  std::int64_t id_;
};

// Megatron's build_blending_indices (megatron/core/datasets/helpers.cpp),
// transcribed.
std::vector<std::pair<int, std::int64_t>> megatron_blending(std::vector<double> weights, std::int64_t size) {
  double sum = 0;
  for (double w : weights) sum += w;
  for (double& w : weights) w /= sum;
  std::vector<std::int64_t> current(weights.size(), 0);
  std::vector<std::pair<int, std::int64_t>> out;
  for (std::int64_t sample_idx = 0; sample_idx < size; ++sample_idx) {
    const double sample_idx_double = std::max(static_cast<double>(sample_idx), 1.0);
    int max_error_index = 0;
    double max_error = weights[0] * sample_idx_double - static_cast<double>(current[0]);
    for (std::size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * sample_idx_double - static_cast<double>(current[d]);
      if (error > max_error) {
        max_error = error;
        max_error_index = static_cast<int>(d);
      }
    }
    out.emplace_back(max_error_index, current[max_error_index]);
    ++current[max_error_index];
  }
  return out;
}

TEST(BlendedDataset, ChoosesEachSampleAsMegatronsBlendingIndicesDo) {
  const std::vector<double> weights = {7, 2, 1};
  const BlendedDataset blend(weights, {std::make_shared<LabelledCorpus>(0), std::make_shared<LabelledCorpus>(1),
                                       std::make_shared<LabelledCorpus>(2)});
  const auto expected = megatron_blending(weights, 1000);
  std::vector<int> counts(3, 0);
  std::vector<std::int64_t> row(4);
  for (std::int64_t i = 999; i >= 0; --i) {  // any order of reads
    const auto [d, n] = blend.source_of(i);
    EXPECT_EQ(static_cast<int>(d), expected[i].first) << i;
    EXPECT_EQ(n, expected[i].second) << i;
    blend.sample(0, i, row.size(), row.data());
    EXPECT_EQ(row[0], static_cast<std::int64_t>(d));
    EXPECT_EQ(row[1], n);
    ++counts[d];
  }
  EXPECT_EQ(counts, (std::vector<int>{700, 200, 100}));
}

TEST(BlendedDataset, RefusesAWeightThatIsNotPositive) {
  EXPECT_THROW(BlendedDataset({1, 0}, {std::make_shared<LabelledCorpus>(0), std::make_shared<LabelledCorpus>(1)}),
               std::invalid_argument);
  EXPECT_THROW(BlendedDataset({1}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace hp::data
