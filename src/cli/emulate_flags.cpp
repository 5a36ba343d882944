#include "cli/emulate_flags.hpp"

#include <cmath>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "model/transformer_config.hpp"

namespace hp::cli {
namespace {

std::optional<double> milliseconds(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v >= 0 && v <= 60000) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// (F, B) of "F" or "F,B"; nullopt when either is not milliseconds in range.
std::optional<std::pair<double, double>> parse(const std::string& spec) {
  std::istringstream in(spec);
  std::string f, b;
  std::getline(in, f, ',');
  const bool has_b = static_cast<bool>(std::getline(in, b));
  const auto fm = milliseconds(f);
  const auto bm = has_b ? milliseconds(b) : (fm ? std::optional<double>(2 * *fm) : std::nullopt);
  if (!fm || !bm) return std::nullopt;
  return std::pair{*fm, *bm};
}

}  // namespace

std::string check_emulate_layer_ms(const std::string& spec) {
  if (parse(spec)) return "";
  return "'" + spec + "': expected F or F,B, each layer's forward and backward milliseconds in [0, 60000]";
}

model::EmulatedLayer emulate_from_flag(const std::string& spec, model::EmulatedLayer base) {
  if (spec.empty()) return base;
  const auto times = parse(spec);
  if (!times) throw std::invalid_argument("--emulate-layer-ms: " + check_emulate_layer_ms(spec));
  base.forward_ms = times->first;
  base.backward_ms = times->second;
  return base;
}

}  // namespace hp::cli
