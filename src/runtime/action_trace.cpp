#include "runtime/action_trace.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace hp::runtime {

std::string trace_events_json(const std::vector<TraceEvent>& events) {
  nlohmann::json a = nlohmann::json::array();
  // Action{} marks an event outside any action (a FWD always has a micro);
  // MPIPE_PARAM_BROADCAST and MPIPE_GRAD_REDUCE have none either, and are actions.
  for (const TraceEvent& e : events)
    a.push_back({e.name, e.category, e.action == schedule::Action{} ? "" : schedule::format_action(e.action), e.start_us,
                 e.end_us, e.bytes, e.waited_us, e.ready_us});
  return a.dump();
}

std::vector<TraceEvent> trace_events_from_json(const std::string& text) {
  std::vector<TraceEvent> out;
  for (const auto& j : nlohmann::json::parse(text)) {
    TraceEvent e;
    e.name = j.at(0).get<std::string>();
    e.category = j.at(1).get<std::string>();
    const std::string text = j.at(2).get<std::string>();
    if (!text.empty()) {
      const auto action = schedule::parse_action(text);
      if (!action) throw std::invalid_argument("trace: bad action " + text);
      e.action = *action;
    }
    e.start_us = j.at(3).get<double>();
    e.end_us = j.at(4).get<double>();
    e.bytes = j.at(5).get<std::int64_t>();
    e.waited_us = j.at(6).get<double>();
    e.ready_us = j.at(7).get<double>();
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace hp::runtime
