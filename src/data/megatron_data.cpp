#include "data/megatron_data.hpp"

#include <cfenv>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "data/blended_dataset.hpp"
#include "data/gpt_dataset.hpp"
#include "data/indexed_dataset.hpp"

namespace hp::data {
namespace {

constexpr const char* kPartNames[3] = {"train", "validation", "test"};

bool parse_number(const std::string& s, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size() && std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

struct BlendEntry {
  double weight;
  std::string prefix;
};

std::vector<BlendEntry> parse_blend(const std::string& spec) {
  std::istringstream in(spec);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.size() == 1) return {{1.0, words[0]}};
  const std::string form = "; a blend is \"WEIGHT PREFIX WEIGHT PREFIX ...\" with weights > 0, as Megatron's data path";
  if (words.empty() || words.size() % 2 != 0)
    throw std::invalid_argument("data.data \"" + spec + "\": " + std::to_string(words.size()) + " words" + form);
  std::vector<BlendEntry> blend;
  for (std::size_t i = 0; i < words.size(); i += 2) {
    double w = 0;
    if (!parse_number(words[i], w) || !(w > 0))
      throw std::invalid_argument("data.data \"" + spec + "\": \"" + words[i] + "\" is not a weight" + form);
    blend.push_back({w, words[i + 1]});
  }
  return blend;
}

}  // namespace

bool is_megatron_data(const std::string& spec) {
  return spec.find_first_of(" \t") != std::string::npos || is_indexed_dataset(spec);
}

std::array<std::size_t, 4> split_documents(const std::string& split, std::size_t documents) {
  const std::string text = split.empty() ? kDefaultSplit : split;
  const std::string form = "; use up to three weights >= 0 for train,validation,test, e.g. " + std::string(kDefaultSplit);
  std::vector<double> weights;
  std::string word;
  std::istringstream in(text);
  while (std::getline(in, word, text.find('/') != std::string::npos ? '/' : ',')) {
    double w = 0;
    if (!parse_number(word, w) || w < 0)
      throw std::invalid_argument("data.split " + text + ": \"" + word + "\" is not a weight" + form);
    weights.push_back(w);
  }
  double sum = 0;
  for (double w : weights) sum += w;
  if (weights.empty() || weights.size() > 3 || !(sum > 0))
    throw std::invalid_argument("data.split " + text + ": " + std::to_string(weights.size()) + " weights summing to " +
                                std::to_string(sum) + form);
  weights.resize(3, 0.0);
  std::array<std::int64_t, 4> at{0, 0, 0, 0};
  const int mode = std::fegetround();
  std::fesetround(FE_TONEAREST);  // Python's round: half to even
  for (int k = 0; k < 3; ++k)
    at[k + 1] = at[k] + static_cast<std::int64_t>(std::nearbyint(weights[k] / sum * static_cast<double>(documents)));
  std::fesetround(mode);
  const std::int64_t surplus = at[3] - static_cast<std::int64_t>(documents);
  std::array<std::size_t, 4> out{0, 0, 0, 0};
  for (int k = 1; k < 4; ++k) out[k] = static_cast<std::size_t>(std::max<std::int64_t>(0, at[k] - surplus));
  return out;
}

std::array<std::shared_ptr<const SampledCorpus>, 3> open_megatron_data(const std::string& spec,
                                                                       const std::string& split, int seq_len) {
  const auto blend = parse_blend(spec);
  std::array<std::vector<double>, 3> weights;
  std::array<std::vector<std::shared_ptr<const SampledCorpus>>, 3> parts;
  for (const auto& entry : blend) {
    if (!is_indexed_dataset(entry.prefix))
      throw std::invalid_argument("data.data " + entry.prefix + ": no indexed dataset there (" + entry.prefix +
                                  ".bin and " + entry.prefix + ".idx must both exist)");
    auto dataset = std::make_shared<const IndexedDataset>(entry.prefix);
    const auto bounds = split_documents(split, dataset->documents());
    for (int k = 0; k < 3; ++k) {
      if (bounds[k + 1] == bounds[k]) continue;
      std::shared_ptr<const SampledCorpus> part;
      try {
        part = std::make_shared<const GptDataset>(dataset, bounds[k], bounds[k + 1], seq_len, kPartNames[k]);
      } catch (const std::invalid_argument&) {
        if (k == 0) throw;
        continue;  // a held-out part too small for one sample: none (evaluation then asks for data.eval_data)
      }
      weights[k].push_back(entry.weight);
      parts[k].push_back(std::move(part));
    }
    if (bounds[1] == 0)
      throw std::invalid_argument("data.split " + (split.empty() ? std::string(kDefaultSplit) : split) +
                                  " leaves no training documents of the " + std::to_string(dataset->documents()) +
                                  " in " + entry.prefix + "; give the train part a larger weight");
  }
  std::array<std::shared_ptr<const SampledCorpus>, 3> out;
  for (int k = 0; k < 3; ++k) {
    if (parts[k].size() == 1 && blend.size() == 1) out[k] = parts[k][0];
    else if (!parts[k].empty()) out[k] = std::make_shared<const BlendedDataset>(weights[k], parts[k]);
  }
  return out;
}

}  // namespace hp::data
