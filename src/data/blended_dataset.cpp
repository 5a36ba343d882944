#include "data/blended_dataset.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace hp::data {

BlendedDataset::BlendedDataset(std::vector<double> weights, std::vector<std::shared_ptr<const SampledCorpus>> parts)
    : weights_(std::move(weights)), parts_(std::move(parts)), taken_(parts_.size(), 0) {
  if (parts_.empty() || weights_.size() != parts_.size())
    throw std::invalid_argument("BlendedDataset: " + std::to_string(weights_.size()) + " weights for " +
                                std::to_string(parts_.size()) + " datasets");
  for (double w : weights_)
    if (!(w > 0)) throw std::invalid_argument("data.data: blend weights must be > 0, got " + std::to_string(w));
  const double sum = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (double& w : weights_) w /= sum;
}

std::pair<std::size_t, std::int64_t> BlendedDataset::source_of(std::int64_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto n = static_cast<std::int64_t>(part_of_.size()); n <= i; ++n) {
    const double at = std::max(static_cast<double>(n), 1.0);
    std::size_t best = 0;
    double best_error = weights_[0] * at - static_cast<double>(taken_[0]);
    for (std::size_t d = 1; d < parts_.size(); ++d) {
      const double error = weights_[d] * at - static_cast<double>(taken_[d]);
      if (error > best_error) {
        best = d;
        best_error = error;
      }
    }
    part_of_.push_back(static_cast<std::uint32_t>(best));
    number_of_.push_back(taken_[best]++);
  }
  return {part_of_[static_cast<std::size_t>(i)], number_of_[static_cast<std::size_t>(i)]};
}

void BlendedDataset::sample(std::uint64_t seed, std::int64_t i, std::size_t window, std::int64_t* out) const {
  const auto [d, n] = source_of(i);
  parts_[d]->sample(seed, n, window, out);
}

std::int64_t BlendedDataset::vocab_size() const {
  std::int64_t v = 0;
  for (const auto& p : parts_) v = std::max(v, p->vocab_size());
  return v;
}

std::size_t BlendedDataset::longest_row() const {
  std::size_t n = parts_[0]->longest_row();
  for (const auto& p : parts_) n = std::min(n, p->longest_row());
  return n;
}

std::string BlendedDataset::describe() const {
  std::string s = "blend of";
  for (std::size_t d = 0; d < parts_.size(); ++d)
    s += (d ? ", " : " ") + std::to_string(weights_[d]).substr(0, 5) + " x " + parts_[d]->describe();
  return s;
}

}  // namespace hp::data
