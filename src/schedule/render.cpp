// The JSON renderers: Chrome trace events and the report summary. The text
// grid and the SVG timeline live in render_grid.cpp and render_svg.cpp.
#include "schedule/render.hpp"

#include <nlohmann/json.hpp>

#include "schedule/render_common.hpp"

namespace hp::schedule {
namespace {

using nlohmann::json;
using render_detail::category;
using render_detail::chunk_of;

// The simulator's unit is the millisecond; trace timestamps are microseconds.
constexpr double kMicrosPerUnit = 1000.0;

json metadata(const char* name, int tid, json args) {
  json e = {{"name", name}, {"ph", "M"}, {"pid", 0}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

std::string render_chrome_trace(const Schedule& s, const SimulationReport& r) {
  render_detail::check_report(s, r);
  const int pp = s.pp();
  json events = json::array();
  events.push_back(metadata("process_name", -1, {{"name", "hyperpipe " + render_detail::title_line(s, r)}}));
  for (int rank = 0; rank < pp; ++rank) {
    events.push_back(metadata("thread_name", rank, {{"name", "rank " + std::to_string(rank)}}));
    // Without a sort index Perfetto orders tracks by first event, not by rank.
    events.push_back(metadata("thread_sort_index", rank, {{"sort_index", rank}}));
  }
  for (int rank = 0; rank < pp; ++rank) {
    for (const TimedAction& t : r.ranks[rank].timeline) {
      const Action& a = t.action;
      json args = {{"type", std::string(type_name(a.type))}, {"stage", a.stage}, {"chunk", chunk_of(a.stage, pp)}};
      if (a.micro >= 0) args["micro"] = a.micro;
      if (a.peer >= 0) args["peer"] = a.peer;
      json e = {{"name", format_action(a)},
                {"cat", std::string(category(a.type))},
                {"pid", 0},
                {"tid", rank},
                {"ts", t.start * kMicrosPerUnit},
                {"args", std::move(args)}};
      if (t.end > t.start) {
        e["ph"] = "X";
        e["dur"] = (t.end - t.start) * kMicrosPerUnit;
      } else {
        e["ph"] = "i";
        e["s"] = "t";
      }
      events.push_back(std::move(e));
    }
  }
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return doc.dump(1) + "\n";
}

std::string report_json(const SimulationReport& r) {
  json ranks = json::array();
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankReport& rr = r.ranks[i];
    ranks.push_back({{"rank", static_cast<int>(i)},
                     {"busy", rr.busy},
                     {"idle", rr.idle},
                     {"peak_activations", rr.peak_activations}});
  }
  json doc = {{"step_time", r.step_time}, {"bubble_fraction", r.bubble_fraction}, {"ranks", std::move(ranks)}};
  return doc.dump(2) + "\n";
}

}  // namespace hp::schedule
