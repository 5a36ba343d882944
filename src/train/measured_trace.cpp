#include "train/measured_trace.hpp"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>

#include "comm/process_group.hpp"
#include "schedule/generate.hpp"
#include "schedule/render.hpp"
#include "schedule/simulate.hpp"

namespace hp::train {
namespace {

using runtime::TraceEvent;

double steady_now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every rank's text, on every rank (lengths first, then padded bytes).
std::vector<std::string> gather_text(const std::string& mine, comm::ProcessGroup* world) {
  if (!world || world->world_size() == 1) return {mine};
  const at::Tensor lengths = world->all_gather(at::full({1}, static_cast<std::int64_t>(mine.size()), at::kLong));
  const std::int64_t longest = lengths.max().item<std::int64_t>();
  at::Tensor bytes = at::zeros({longest}, at::kByte);
  std::copy(mine.begin(), mine.end(), bytes.data_ptr<std::uint8_t>());
  const at::Tensor all = world->all_gather(bytes).contiguous();
  std::vector<std::string> out;
  for (int r = 0; r < world->world_size(); ++r) {
    const auto* p = all[r].data_ptr<std::uint8_t>();
    out.emplace_back(reinterpret_cast<const char*>(p), static_cast<std::size_t>(lengths[r].item<std::int64_t>()));
  }
  return out;
}

void write_file(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream f(path);
  f << text;
  if (!f) throw std::runtime_error(flag + " " + path + ": cannot write the file");
}

// The measured step as a simulation report (ms from the step's first event):
// compute and posts on each rank's row, each action from the end of the waits
// for its input (waiting is idle time), busy = the compute drawn.
schedule::SimulationReport measured_report(const std::vector<std::vector<TraceEvent>>& ranks, double t0) {
  schedule::SimulationReport r;
  double end = 0;
  for (const auto& events : ranks) {
    schedule::RankReport rr;
    schedule::ActivationCount held;
    for (const TraceEvent& e : events) {
      if (e.category == "wait") continue;
      // An action that waited for its input starts computing when the data is there.
      const double s = (e.ready_us - t0) / 1000.0, f = (e.end_us - t0) / 1000.0;
      rr.timeline.push_back({e.action, s, f});
      end = std::max(end, f);
      if (e.category == "compute") rr.busy += f - s;
      held.count(e.action.type, rr);
    }
    r.ranks.push_back(std::move(rr));
  }
  r.step_time = end;
  double idle = 0;
  for (auto& rr : r.ranks) idle += rr.idle = end - rr.busy;
  r.bubble_fraction = end > 0 ? idle / (static_cast<double>(r.ranks.size()) * end) : 0;
  return r;
}

// Per-stage forward and backward costs (ms, waits excluded), averaged over
// the micro-batches, and the MPipe preprocess's, as the simulator takes them.
schedule::CostModel measured_costs(const std::vector<std::vector<TraceEvent>>& ranks) {
  std::map<std::pair<int, schedule::ActionType>, std::pair<double, int>> sum;
  for (const auto& events : ranks)
    for (const TraceEvent& e : events) {
      if (e.category != "compute") continue;
      auto& [total, n] = sum[{e.action.stage, e.action.type}];
      total += e.busy_us() / 1000.0;
      ++n;
    }
  schedule::CostModel c;
  auto mean = [&](int stage, schedule::ActionType t, double fallback) {
    auto it = sum.find({stage, t});
    return it == sum.end() || it->second.second == 0 ? fallback : it->second.first / it->second.second;
  };
  int stages = 0;
  for (const auto& [key, v] : sum) stages = std::max(stages, key.first + 1);
  // A split backward's B is its I and W together (-1: no split measured).
  for (int s = 0; s < stages; ++s) {
    const double i = mean(s, schedule::ActionType::BWD_I, -1), w = mean(s, schedule::ActionType::BWD_W, -1);
    const double b = i >= 0 && w >= 0 ? i + w : mean(s, schedule::ActionType::BWD, 0);
    c.per_stage[s] = {mean(s, schedule::ActionType::FWD, 0), b, i, w};
  }
  c.pre_f = mean(0, schedule::ActionType::MPIPE_TRANSPOSE_FWD, 0);
  c.pre_b = mean(0, schedule::ActionType::MPIPE_TRANSPOSE_BWD, 0);
  c.recompute = 0;  // the measured TRANSPOSE_BWD already holds its recompute
  return c;
}

std::string chrome_trace(const std::vector<std::vector<TraceEvent>>& ranks, double t0) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    for (const TraceEvent& e : ranks[r]) {
      nlohmann::json j = {{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", 0}, {"tid", r},
                          {"ts", e.start_us - t0}, {"dur", e.end_us - e.start_us}};
      if (e.category != "compute") j["args"] = {{"bytes", e.bytes}};
      events.push_back(std::move(j));
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n";
}

// Two SVG pictures one above the other, each with a caption.
std::string stack_svgs(const std::vector<std::pair<std::string, std::string>>& parts) {
  auto number_after = [](const std::string& svg, const std::string& key) {
    const auto at = svg.find(key + "=\"");
    return at == std::string::npos ? 0.0 : std::stod(svg.substr(at + key.size() + 2));
  };
  double width = 0, height = 0;
  std::string body;
  for (const auto& [caption, svg] : parts) {
    body += "<text x=\"12\" y=\"" + std::to_string(height + 18) + "\" font-size=\"14\" font-weight=\"bold\">" + caption +
            "</text>\n";
    body += "<svg y=\"" + std::to_string(height + 24) + "\"" + svg.substr(svg.find("<svg") + 4);
    width = std::max(width, number_after(svg, "width"));
    height += 24 + number_after(svg, "height");
  }
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n" + body + "</svg>\n";
}

}  // namespace

double clock_offset_us(comm::ProcessGroup* world) {
  if (!world || world->world_size() == 1) return 0;
  world->barrier();
  const auto t = comm::all_gather_rows(world, {steady_now_us()});
  return t[static_cast<size_t>(world->rank())][0] - t[0][0];
}

void write_measured_trace(const runtime::ActionTrace& trace, double offset_us, comm::ProcessGroup* world,
                          const schedule::ScheduleOptions& layout, const TraceOutputs& out) {
  // Times on rank 0's clock: this rank's origin, less its offset.
  std::vector<TraceEvent> mine = trace.events();
  for (TraceEvent& e : mine)
    for (double* t : {&e.start_us, &e.end_us, &e.ready_us}) *t += trace.origin_us() - offset_us;
  const auto texts = gather_text(runtime::trace_events_json(mine), world);
  if (world && world->rank() != 0) return;
  std::vector<std::vector<TraceEvent>> ranks;
  double t0 = std::numeric_limits<double>::infinity();
  for (const auto& text : texts) {
    ranks.push_back(runtime::trace_events_from_json(text));
    for (const TraceEvent& e : ranks.back()) t0 = std::min(t0, e.start_us);
  }
  if (!std::isfinite(t0)) t0 = 0;
  if (!out.chrome.empty()) write_file(out.chrome, chrome_trace(ranks, t0), "train.trace.chrome");
  if (out.timeline.empty()) return;
  const schedule::Schedule s = schedule::generate(layout);
  if (ranks.size() != s.ranks.size())
    throw std::invalid_argument("train.trace.timeline draws one pipeline: the job's " + std::to_string(ranks.size()) +
                                " ranks are not its " + std::to_string(s.ranks.size()) + " stages' ranks");
  const auto measured = measured_report(ranks, t0);
  std::string svg = schedule::render_svg(s, measured);
  if (out.simulate) {
    const auto simulated = schedule::simulate(s, measured_costs(ranks));
    svg = stack_svgs({{"measured", svg}, {"simulated with the measured per-stage costs", schedule::render_svg(s, simulated)}});
  }
  write_file(out.timeline, svg, "train.trace.timeline");
}

}  // namespace hp::train
