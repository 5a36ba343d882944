// The SVG timeline: a row per rank on a grey (idle) band, one box per drawn
// action coloured by kind, a time axis, a legend and a title with the layout
// and the simulated step time. Plain SVG 1.1, no scripts, no external files.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "schedule/render.hpp"
#include "schedule/render_common.hpp"

namespace hp::schedule {
namespace {

using render_detail::BoxKind;
using render_detail::box_kind;
using render_detail::fmt;
using render_detail::is_drawn;

constexpr double kLeft = 72;     // rank labels
constexpr double kRight = 110;   // busy / peak column
constexpr double kTop = 46;      // title
constexpr double kRowH = 26;
constexpr double kRowGap = 8;
constexpr double kFontSize = 11;
constexpr double kCharW = 6.6;   // average glyph advance at kFontSize, for fitting labels
constexpr double kMinPlotW = 640;
constexpr double kMaxPlotW = 2000;
constexpr double kPxPerSlot = 22;  // the shortest box gets about this many pixels

struct Rgb {
  double r, g, b;
};

Rgb mix(Rgb a, Rgb b, double t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

std::string hex(Rgb c) {
  static const char* digits = "0123456789abcdef";
  std::string out = "#";
  for (double v : {c.r, c.g, c.b}) {
    const int i = std::clamp(static_cast<int>(std::lround(v)), 0, 255);
    out += digits[i / 16];
    out += digits[i % 16];
  }
  return out;
}

// Forward, backward and the split backward's I and W get one hue each; chunks go from dark (chunk 0) to
// light (chunk v-1) so the loop over virtual stages is visible. MPipe steps
// get hues of their own and are hatched (see hatched()).
Rgb fill_rgb(BoxKind k, int chunk, int vpp) {
  const double t = vpp > 1 ? 0.62 * chunk / (vpp - 1) : 0.0;
  switch (k) {
    case BoxKind::Forward: return mix({38, 98, 170}, {255, 255, 255}, t);
    case BoxKind::Backward: return mix({214, 108, 24}, {255, 255, 255}, t);
    case BoxKind::InputBackward: return mix({200, 40, 40}, {255, 255, 255}, t);
    case BoxKind::WeightBackward: return mix({46, 140, 60}, {255, 255, 255}, t);
    case BoxKind::TransposeFwd: return {123, 79, 168};
    case BoxKind::TransposeBwd: return {184, 51, 106};
    case BoxKind::GradRecvBwd: return {31, 138, 122};
    case BoxKind::Broadcast: return {201, 162, 39};
    case BoxKind::GradReduce: return {107, 78, 61};
    case BoxKind::Comm: break;
  }
  return {51, 51, 51};
}

bool hatched(BoxKind k) {
  return k == BoxKind::TransposeFwd || k == BoxKind::TransposeBwd || k == BoxKind::GradRecvBwd;
}

std::string text_colour(Rgb c) {
  const double luma = (0.299 * c.r + 0.587 * c.g + 0.114 * c.b) / 255.0;
  return luma < 0.6 ? "#ffffff" : "#1a1a1a";
}

std::string esc(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string px(double v) { return fmt(v, 2); }

// A 1-2-5 step giving about `target` ticks over the span.
double tick_step(double span, int target) {
  const double raw = span / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10.0 * p;
}

std::string box_text(const Action& a) {
  switch (box_kind(a.type)) {
    case BoxKind::Broadcast: return "BC";
    case BoxKind::GradReduce: return "GR";
    default: return std::to_string(a.micro);
  }
}

struct LegendItem {
  std::string label;
  std::string fill;
  bool hatch = false;
  bool tick = false;
};

std::vector<LegendItem> legend_items(const Schedule& s, const SimulationReport& r, bool any_comm) {
  const int pp = s.pp();
  const int vpp = std::max(1, s.options.vpp);
  std::set<std::pair<BoxKind, int>> seen;  // (kind, chunk; 0 for non-body kinds)
  for (const RankReport& rr : r.ranks) {
    for (const TimedAction& t : rr.timeline) {
      if (!is_drawn(t)) continue;
      const BoxKind k = box_kind(t.action.type);
      const bool body = render_detail::is_body(k);
      seen.insert({k, body ? render_detail::chunk_of(t.action.stage, pp) : 0});
    }
  }
  std::vector<LegendItem> items;
  for (const auto& [k, chunk] : seen) {
    std::string label(render_detail::box_kind_name(k));
    const bool body = render_detail::is_body(k);
    if (body && vpp > 1) label += " chunk " + std::to_string(chunk);
    items.push_back({label, hex(fill_rgb(k, chunk, vpp)), hatched(k), false});
  }
  items.push_back({"idle", "#e4e4e4", false, false});
  if (any_comm) items.push_back({"send (tick)", "#333333", false, true});
  return items;
}

}  // namespace

std::string render_svg(const Schedule& s, const SimulationReport& r) {
  render_detail::check_report(s, r);
  const int pp = s.pp();
  const int vpp = std::max(1, s.options.vpp);

  double span = r.step_time;
  double shortest = std::numeric_limits<double>::infinity();
  bool any_comm = false;
  for (const RankReport& rr : r.ranks) {
    for (const TimedAction& t : rr.timeline) {
      span = std::max(span, t.end);
      if (is_drawn(t)) shortest = std::min(shortest, t.end - t.start);
      any_comm = any_comm || is_send(t.action.type);
    }
  }
  if (!(span > 0)) span = 1;
  if (!std::isfinite(shortest)) shortest = span;
  const double plot_w = std::clamp(std::ceil(span / shortest) * kPxPerSlot, kMinPlotW, kMaxPlotW);
  const double scale = plot_w / span;
  const double width = kLeft + plot_w + kRight;
  auto x_of = [&](double t) { return kLeft + t * scale; };
  auto row_y = [&](int rank) { return kTop + rank * (kRowH + kRowGap); };
  const double axis_y = row_y(pp) - kRowGap + 6;

  // Legend rows wrap at the picture's width.
  const std::vector<LegendItem> items = legend_items(s, r, any_comm);
  std::vector<std::pair<double, double>> legend_pos;
  const double legend_top = axis_y + 44;
  double lx = kLeft, ly = legend_top;
  for (const LegendItem& it : items) {
    const double w = 14 + 6 + it.label.size() * kCharW + 18;
    if (lx + w > width - 10 && lx > kLeft) {
      lx = kLeft;
      ly += 20;
    }
    legend_pos.push_back({lx, ly});
    lx += w;
  }
  const double height = ly + 24;

  std::string o;
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + px(width) + "\" height=\"" + px(height) +
       "\" viewBox=\"0 0 " + px(width) + " " + px(height) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"" +
       px(kFontSize) + "\">\n";
  o += "<title>" + esc("hyperpipe " + render_detail::title_line(s, r)) + "</title>\n";
  o += "<defs>\n<pattern id=\"hatch\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" patternTransform=\"rotate(45)\">"
       "<rect x=\"0\" y=\"0\" width=\"2\" height=\"6\" fill=\"#ffffff\" fill-opacity=\"0.42\"/></pattern>\n</defs>\n";
  o += "<rect x=\"0\" y=\"0\" width=\"" + px(width) + "\" height=\"" + px(height) + "\" fill=\"#ffffff\"/>\n";
  o += "<text x=\"" + px(kLeft) + "\" y=\"24\" font-size=\"14\" font-weight=\"bold\" fill=\"#1a1a1a\">" +
       esc(render_detail::title_line(s, r)) + "</text>\n";

  o += "<text x=\"" + px(kLeft + plot_w + 10) + "\" y=\"" + px(kTop - 8) + "\" font-size=\"10\" fill=\"#666666\">busy | peak act.</text>\n";

  // Vertical grid lines at the ticks, under the rows' boxes.
  const double step = tick_step(span, static_cast<int>(plot_w / 90));
  std::vector<double> ticks;
  for (int i = 0; i * step <= span * (1 + 1e-9); ++i) ticks.push_back(i * step);
  o += "<g stroke=\"#d0d0d0\" stroke-width=\"1\">\n";
  for (double t : ticks)
    o += "<line x1=\"" + px(x_of(t)) + "\" y1=\"" + px(kTop - 4) + "\" x2=\"" + px(x_of(t)) + "\" y2=\"" + px(axis_y) + "\"/>\n";
  o += "</g>\n";

  for (int rank = 0; rank < pp; ++rank) {
    const RankReport& rr = r.ranks[rank];
    const double y = row_y(rank);
    o += "<g>\n";
    o += "<text x=\"" + px(kLeft - 10) + "\" y=\"" + px(y + kRowH / 2 + 4) + "\" text-anchor=\"end\" fill=\"#1a1a1a\">rank " +
         std::to_string(rank) + "</text>\n";
    o += "<rect class=\"idle\" x=\"" + px(kLeft) + "\" y=\"" + px(y) + "\" width=\"" + px(plot_w) + "\" height=\"" + px(kRowH) +
         "\" fill=\"#e4e4e4\"/>\n";
    for (const TimedAction& t : rr.timeline) {
      if (!is_drawn(t)) continue;
      const Action& a = t.action;
      const BoxKind k = box_kind(a.type);
      const Rgb c = fill_rgb(k, render_detail::chunk_of(a.stage, pp), vpp);
      const double x = x_of(t.start), w = (t.end - t.start) * scale;
      const std::string geom = "x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"" + px(w) + "\" height=\"" + px(kRowH) + "\"";
      o += "<rect class=\"action\" " + geom + " fill=\"" + hex(c) + "\" stroke=\"#ffffff\" stroke-width=\"0.8\"><title>" +
           esc(format_action(a) + " rank " + std::to_string(rank) + " [" + fmt(t.start) + ", " + fmt(t.end) + "] ms") +
           "</title></rect>\n";
      if (hatched(k)) o += "<rect class=\"hatch\" " + geom + " fill=\"url(#hatch)\"/>\n";
      const std::string label = box_text(a);
      if (w >= label.size() * kCharW + 4) {
        // Hatching behind a label makes it hard to read: give it a solid chip.
        if (hatched(k)) {
          const double cw = std::min(w - 2, label.size() * kCharW + 4);
          o += "<rect x=\"" + px(x + (w - cw) / 2) + "\" y=\"" + px(y + kRowH / 2 - 7) + "\" width=\"" + px(cw) +
               "\" height=\"14\" fill=\"" + hex(c) + "\"/>\n";
        }
        o += "<text x=\"" + px(x + w / 2) + "\" y=\"" + px(y + kRowH / 2 + 4) + "\" text-anchor=\"middle\" fill=\"" +
             text_colour(c) + "\">" + esc(label) + "</text>\n";
      }
    }
    // Sends as ticks under the row: where each transfer leaves its rank.
    for (const TimedAction& t : rr.timeline) {
      if (!is_send(t.action.type)) continue;
      const double x = x_of(t.start);
      o += "<line class=\"send\" x1=\"" + px(x) + "\" y1=\"" + px(y + kRowH - 5) + "\" x2=\"" + px(x) + "\" y2=\"" + px(y + kRowH + 2) +
           "\" stroke=\"#333333\" stroke-width=\"1.2\"><title>" + esc(format_action(t.action) + " at " + fmt(t.start) + " ms") +
           "</title></line>\n";
    }
    const double busy = r.step_time > 0 ? 100.0 * rr.busy / r.step_time : 0.0;
    o += "<text x=\"" + px(kLeft + plot_w + 10) + "\" y=\"" + px(y + kRowH / 2 + 4) + "\" fill=\"#444444\">" + fmt(busy, 0) +
         "% | " + std::to_string(rr.peak_activations) + "</text>\n";
    o += "</g>\n";
  }

  // Time axis.
  o += "<g fill=\"#1a1a1a\">\n";
  o += "<line x1=\"" + px(kLeft) + "\" y1=\"" + px(axis_y) + "\" x2=\"" + px(kLeft + plot_w) + "\" y2=\"" + px(axis_y) +
       "\" stroke=\"#1a1a1a\" stroke-width=\"1\"/>\n";
  for (double t : ticks) {
    o += "<line x1=\"" + px(x_of(t)) + "\" y1=\"" + px(axis_y) + "\" x2=\"" + px(x_of(t)) + "\" y2=\"" + px(axis_y + 5) +
         "\" stroke=\"#1a1a1a\" stroke-width=\"1\"/>\n";
    o += "<text x=\"" + px(x_of(t)) + "\" y=\"" + px(axis_y + 17) + "\" text-anchor=\"middle\">" + fmt(t) + "</text>\n";
  }
  o += "<text x=\"" + px(kLeft + plot_w) + "\" y=\"" + px(axis_y + 32) + "\" text-anchor=\"end\">time (ms)</text>\n";
  o += "</g>\n";

  o += "<g>\n";
  for (size_t i = 0; i < items.size(); ++i) {
    const auto [x, y] = legend_pos[i];
    const LegendItem& it = items[i];
    if (it.tick) {
      o += "<line x1=\"" + px(x + 7) + "\" y1=\"" + px(y) + "\" x2=\"" + px(x + 7) + "\" y2=\"" + px(y + 14) +
           "\" stroke=\"" + it.fill + "\" stroke-width=\"1.5\"/>\n";
    } else {
      const std::string geom = "x=\"" + px(x) + "\" y=\"" + px(y) + "\" width=\"14\" height=\"14\"";
      o += "<rect " + geom + " fill=\"" + it.fill + "\" stroke=\"#999999\" stroke-width=\"0.5\"/>\n";
      if (it.hatch) o += "<rect " + geom + " fill=\"url(#hatch)\"/>\n";
    }
    o += "<text x=\"" + px(x + 20) + "\" y=\"" + px(y + 11) + "\" fill=\"#1a1a1a\">" + esc(it.label) + "</text>\n";
  }
  o += "</g>\n</svg>\n";
  return o;
}

}  // namespace hp::schedule
