#include "cli/option_flags.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace hp::cli {
std::string with_flags(std::string message, const FlagNames& flags) {
  for (const auto& [name, flag] : flags) {
    for (size_t at = message.find(name); at != std::string::npos; at = message.find(name, at + flag.size()))
      message.replace(at, name.size(), flag);
  }
  return message;
}

void longest_first(FlagNames& flags) {
  std::stable_sort(flags.begin(), flags.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

schedule::Overflow overflow_from_flag(const std::string& value) {
  for (auto o : {schedule::Overflow::Full, schedule::Overflow::Min, schedule::Overflow::Auto})
    if (value == schedule::overflow_name(o)) return o;
  throw std::logic_error("overflow_from_flag: '" + value + "' passed --overflow's rule but names no mode");
}

std::vector<int> layer_counts_from_flag(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string cell;
  while (std::getline(in, cell, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoi(cell, &used));
      if (used != cell.size()) throw std::invalid_argument(cell);
    } catch (const std::exception&) {
      throw std::invalid_argument("--layers-per-stage '" + text +
                                  "': expected comma-separated layer counts per global stage, e.g. 2,2,1,3");
    }
  }
  return out;
}

schedule::ScheduleKind mpipe_body_from_flag(const std::string& value) {
  schedule::ScheduleKind k;
  if (schedule::kind_from_name(value, &k) && schedule::is_mpipe_body(k)) return k;
  throw std::logic_error("mpipe_body_from_flag: '" + value + "' passed --mpipe-body's rule but names no body");
}

void apply_mpipe_flags(const std::string& mpipe_body, const std::string& overflow, bool vpp_given,
                       schedule::ScheduleOptions& o) {
  o.mpipe.body = mpipe_body_from_flag(mpipe_body);
  if (!vpp_given) o.vpp = schedule::default_vpp(o);
  o.mpipe.overflow = overflow_from_flag(overflow);
}

}  // namespace hp::cli
