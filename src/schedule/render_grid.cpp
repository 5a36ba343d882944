// The text grid: a row per rank, a column per time slot.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "schedule/render.hpp"
#include "schedule/render_common.hpp"

namespace hp::schedule {
namespace {

using render_detail::BoxKind;
using render_detail::box_kind;
using render_detail::is_drawn;

// Wider grids stop being readable in a terminal; the full picture is the SVG.
constexpr long kMaxSlots = 400;

// One slot is the shortest drawn action, so every box covers a whole number of
// cells and the shortest ones get exactly one.
double slot_length(const SimulationReport& r) {
  double slot = std::numeric_limits<double>::infinity();
  for (const RankReport& rr : r.ranks)
    for (const TimedAction& t : rr.timeline)
      if (is_drawn(t)) slot = std::min(slot, t.end - t.start);
  return slot;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void rstrip(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
}

std::string legend(const std::set<BoxKind>& kinds, int vpp) {
  std::string out = "legend:";
  const std::string c = vpp > 1 ? ".c" : "";
  const std::string on_chunk = vpp > 1 ? " on chunk c" : "";
  for (BoxKind k : kinds) {
    switch (k) {
      case BoxKind::Forward: out += " Fm" + c + "=forward of micro m" + on_chunk + ";"; break;
      case BoxKind::Backward: out += " Bm" + c + "=backward of micro m" + on_chunk + ";"; break;
      case BoxKind::InputBackward: out += " Im" + c + "=input backward of micro m" + on_chunk + ";"; break;
      case BoxKind::WeightBackward: out += " Wm" + c + "=weight backward of micro m" + on_chunk + ";"; break;
      case BoxKind::TransposeFwd: out += " Tm=MPipe transpose forward;"; break;
      case BoxKind::TransposeBwd: out += " Rm=MPipe transpose backward (recompute);"; break;
      case BoxKind::GradRecvBwd: out += " Gm=MPipe owner backward;"; break;
      case BoxKind::Broadcast: out += " BC=MPipe param broadcast;"; break;
      case BoxKind::GradReduce: out += " GR=MPipe grad reduce;"; break;
      case BoxKind::Comm: break;
    }
  }
  return out + " .=idle (sends and receives not drawn)";
}

}  // namespace

std::string render_text_grid(const Schedule& s, const SimulationReport& r) {
  render_detail::check_report(s, r);
  const int pp = s.pp();
  const int vpp = s.options.vpp;
  std::string out = render_detail::title_line(s, r) + "\n";
  const double slot = slot_length(r);
  if (!std::isfinite(slot)) return out + "(no compute actions to draw)\n";

  // Place each box at its rounded start, pushed right past the previous box on
  // the same rank if rounding made them touch, so every box keeps exactly
  // round(duration / slot) cells.
  struct Cell {
    long col;
    long len;
    std::string label;
  };
  std::vector<std::vector<Cell>> rows(pp);
  std::set<BoxKind> kinds;
  size_t label_width = 1;
  long slots = std::lround(r.step_time / slot);
  for (int rank = 0; rank < pp; ++rank) {
    long next_free = 0;
    for (const TimedAction& t : r.ranks[rank].timeline) {
      if (!is_drawn(t)) continue;
      const long len = std::max(1L, std::lround((t.end - t.start) / slot));
      const long col = std::max(next_free, std::lround(t.start / slot));
      rows[rank].push_back({col, len, render_detail::short_label(t.action, pp, vpp)});
      label_width = std::max(label_width, rows[rank].back().label.size());
      kinds.insert(box_kind(t.action.type));
      next_free = col + len;
      slots = std::max(slots, next_free);
    }
  }
  const long shown = std::min(slots, kMaxSlots);
  const size_t width = std::max(label_width, std::to_string(std::max(0L, shown - 1)).size()) + 1;
  const std::string head_rank = "rank " + std::to_string(pp - 1);
  const size_t margin = std::max(head_rank.size(), std::string("slot").size()) + 2;

  out += "1 slot = " + render_detail::fmt(slot) + " ms\n";
  std::string header = pad("slot", margin);
  for (long c = 0; c < shown; ++c) header += pad(std::to_string(c), width);
  rstrip(header);
  out += header + "\n";
  for (int rank = 0; rank < pp; ++rank) {
    std::vector<std::string> cells(shown, ".");
    for (const Cell& cell : rows[rank])
      for (long c = cell.col; c < cell.col + cell.len && c < shown; ++c) cells[c] = cell.label;
    std::string line = pad("rank " + std::to_string(rank), margin);
    for (const std::string& c : cells) line += pad(c, width);
    rstrip(line);
    out += line + "\n";
  }
  if (slots > shown) {
    out += "(truncated: " + std::to_string(slots) + " slots, showing the first " + std::to_string(shown) +
           "; see the SVG or Chrome trace for the whole step)\n";
  }
  out += legend(kinds, vpp) + "\n";
  return out;
}

}  // namespace hp::schedule
