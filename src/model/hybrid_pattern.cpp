#include "model/hybrid_pattern.hpp"

#include <stdexcept>

namespace hp::model {
namespace {

[[noreturn]] void bad_pattern(const std::string& m) { throw std::invalid_argument("model.hybrid_pattern: " + m); }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

std::vector<LayerKind> layers_of(const std::string& part, const std::string& pattern) {
  std::vector<LayerKind> out;
  for (char c : part) {
    switch (c) {
      case 'M': case '*': case '-': case 'E': out.push_back(static_cast<LayerKind>(c)); break;
      default:
        bad_pattern("'" + pattern + "' has the symbol '" + std::string(1, c) +
             "'; accepted: M (Mamba), * (attention), - (MLP), E (mixture of experts), | (pipeline segment), "
             "/ (multi-token prediction)");
    }
  }
  return out;
}

}  // namespace

HybridPattern HybridPattern::parse(const std::string& pattern) {
  HybridPattern p;
  const auto parts = split(pattern, '/');
  for (const auto& segment : split(parts[0], '|')) {
    const auto layers = layers_of(segment, pattern);
    p.layers.insert(p.layers.end(), layers.begin(), layers.end());
    p.segment_sizes.push_back(static_cast<int>(layers.size()));
  }
  for (size_t k = 1; k < parts.size(); ++k) {
    if (parts[k].find('|') != std::string::npos)
      bad_pattern("'" + pattern + "': pipeline boundaries (|) belong to the decoder, not to the MTP part after /");
    const auto layers = layers_of(parts[k], pattern);
    if (layers.empty()) bad_pattern("'" + pattern + "': MTP part " + std::to_string(k) + " has no layer");
    if (k > 1 && layers != p.mtp_layers)
      bad_pattern("'" + pattern + "': every MTP part must be the same layers; part " + std::to_string(k) + " '" +
           parts[k] + "' differs from '" + parts[1] + "'");
    p.mtp_layers = layers;
    ++p.mtp_depth;
  }
  if (p.layers.empty() && p.mtp_depth == 0) bad_pattern("'" + pattern + "' has no layer");
  return p;
}

std::vector<int> HybridPattern::stage_layer_counts(int pp, int vpp) const {
  const int stages = pp * vpp;
  const int total = static_cast<int>(layers.size());
  if (stages == 1) return {total};
  if (segment_sizes.size() > 1) {
    if (static_cast<int>(segment_sizes.size()) != stages)
      bad_pattern(std::to_string(segment_sizes.size()) + " pipeline segments, but schedule.pp " + std::to_string(pp) +
           " x schedule.vpp " + std::to_string(vpp) + " = " + std::to_string(stages) +
           " stages need one each (segment s runs on global stage s)");
    return segment_sizes;
  }
  if (total < stages)
    bad_pattern(std::to_string(total) + " layers cannot fill " + std::to_string(stages) +
         " stages; mark the segments with | (empty ones allowed) or add layers");
  std::vector<int> counts(stages, total / stages);
  for (int s = 0; s < total % stages; ++s) ++counts[s];
  return counts;
}

}  // namespace hp::model
