#include "schedule/schedule_io.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

// Both readers work on physical lines so that every message can name the line
// a user sees in an editor; "\r\n" files from spreadsheets are accepted.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    pos = nl + 1;
  }
  return lines;
}

std::string_view trim(std::string_view s) {
  const char* ws = " \t";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

bool parse_rank(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= 0;
}

// Lines after the last non-blank one may be blank (editors and spreadsheets
// add them); a blank line before a rank row would hide a missing rank, so it
// is an error there.
size_t content_line_count(const std::vector<std::string_view>& lines) {
  size_t n = lines.size();
  while (n > 0 && trim(lines[n - 1]).empty()) --n;
  return n;
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

// Appends the action, or the overlapped pair, the token holds.
void parse_token(std::string_view token, const std::string& where, std::vector<Action>& out) {
  std::string error;
  if (!parse_actions(token, out, &error)) fail(where, error);
}

// Peers can only be checked once the number of rows is known. Whether a peer
// is the right one is validate()'s business; a peer outside the ranks would
// make every later consumer index out of range, so it is rejected here.
void check_peers(const Schedule& s, const char* unit) {
  const int pp = s.pp();
  for (int r = 0; r < pp; ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      if (a.peer >= pp) {
        fail(std::string(unit) + " " + std::to_string(r + 1) + " (rank " + std::to_string(r) +
                 "), action " + std::to_string(i + 1),
             "'" + format_action(a) + "' has peer " + std::to_string(a.peer) +
                 "; expected a rank in 0.." + std::to_string(pp - 1));
      }
    }
  }
}

bool any_of_type(const Schedule& s, ActionType t) {
  for (const auto& rank : s.ranks)
    for (const Action& a : rank)
      if (a.type == t) return true;
  return false;
}

// GPipe and 1F1B differ only in order: GPipe runs every forward of a rank
// before its first backward. With one micro-batch the two are the same
// schedule, and 1F1B is the name the generators use for it.
bool looks_like_gpipe(const Schedule& s) {
  if (s.options.micro_batches < 2) return false;
  for (const auto& rank : s.ranks) {
    bool seen_bwd = false;
    for (const Action& a : rank) {
      if (a.type == ActionType::BWD) seen_bwd = true;
      if (a.type == ActionType::FWD && seen_bwd) return false;
    }
  }
  return true;
}

// Interleaved 1F1B with one chunk per rank warms up min(2(PP-1-r), MB) deep,
// 1F1B only min(PP-1-r, MB): some rank runs more forwards before its first
// backward than 1F1B would. (When MB is so small that no rank does, the
// compute orders coincide and 1F1B is the answer.)
bool looks_like_interleaved(const Schedule& s) {
  const int pp = s.pp(), mb = s.options.micro_batches;
  for (int r = 0; r < pp; ++r) {
    int before_first_bwd = 0;
    for (const Action& a : s.ranks[r]) {
      if (a.type == ActionType::BWD) break;
      if (a.type == ActionType::FWD) ++before_first_bwd;
    }
    const int warmup = std::min(pp - 1 - r, mb);
    if (before_first_bwd > warmup + (warmup < mb ? 1 : 0)) return true;
  }
  return false;
}

// "min" puts every overflow micro (m >= NT) on rank 0, inline right before
// FWD(0, m); "full" spreads them round-robin and runs each owner's transposed
// forwards in its prefix, before the body. Ownership alone decides whenever
// some overflow micro would go to a rank other than 0 under "full"; otherwise
// (MB == NT + 1, or NT == 1) only the position on rank 0 tells them apart.
// Anything else is "auto" with the owners as read (owners = -1 inline on rank 0).
Overflow infer_overflow(const Schedule& s, std::vector<int>* owners) {
  const ScheduleOptions& o = s.options;
  const int nt = o.nt();
  std::vector<int> owner(o.micro_batches, -1);
  std::vector<bool> inline_on_rank0(o.micro_batches, false);
  for (int r = 0; r < s.pp(); ++r) {
    bool body_started = false;
    for (const Action& a : s.ranks[r]) {
      if (a.type == ActionType::FWD) body_started = true;
      if (a.type == ActionType::MPIPE_TRANSPOSE_FWD && a.micro >= 0) {
        owner[a.micro] = r;
        if (r == 0) inline_on_rank0[a.micro] = body_started;
      }
    }
  }
  bool full = true, min = true;
  for (int m = 0; m < o.micro_batches; ++m) {
    const bool in_line = owner[m] == 0 && inline_on_rank0[m];
    full = full && owner[m] == m % nt && !in_line;
    min = min && (m < nt ? owner[m] == m && !in_line : in_line);
  }
  if (full) return Overflow::Full;
  if (min) return Overflow::Min;
  owners->resize(o.micro_batches);
  for (int m = 0; m < o.micro_batches; ++m) (*owners)[m] = owner[m] == 0 && inline_on_rank0[m] ? -1 : owner[m];
  return Overflow::Auto;
}

// The body MPipe transposes around: a zero-bubble schedule's split backward,
// placement and pairs name it as they name the schedule alone; else the first
// of interleaved (the spec's), 1F1B and GPipe whose compute order the
// schedule's FWDs and BWDs follow. Where two bodies coincide (few
// micro-batches) either regenerates the same schedule. One that follows none
// is read as interleaved, and validate() says what is wrong with it.
ScheduleKind infer_mpipe_body(const Schedule& s) {
  Schedule alone = filter(s, [](ActionType t) { return !is_mpipe(t); });
  infer_options(alone);
  if (splits_backward(alone.options.kind)) return alone.options.kind;
  if (s.options.vpp > 1) return ScheduleKind::Interleaved;
  const Schedule compute = filter(s, [](ActionType t) { return t == ActionType::FWD || t == ActionType::BWD; });
  for (ScheduleKind body : {ScheduleKind::Interleaved, ScheduleKind::OneFOneB, ScheduleKind::GPipe}) {
    ScheduleOptions o = s.options;
    o.kind = body;
    try {
      if (body_compute_order(o) == compute.ranks) return body;
    } catch (const std::invalid_argument&) {
    }
  }
  return ScheduleKind::Interleaved;
}

MPipeOptions infer_mpipe(const Schedule& s) {
  MPipeOptions m;
  const bool broadcast = any_of_type(s, ActionType::MPIPE_PARAM_BROADCAST);
  const bool transpose_bwd = any_of_type(s, ActionType::MPIPE_TRANSPOSE_BWD);
  const bool graph = any_of_type(s, ActionType::MPIPE_GRAPH_SEND) ||
                     any_of_type(s, ActionType::MPIPE_GRAPH_RECV);
  const bool grad = any_of_type(s, ActionType::MPIPE_GRAD_SEND) ||
                    any_of_type(s, ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD) ||
                    any_of_type(s, ActionType::MPIPE_GRAD_REDUCE);
  // The actual layer count is not in the actions; 1 stands for "some layers".
  m.transpose_layers = (broadcast || transpose_bwd || graph) ? 1 : 0;
  m.owner_backward = grad;
  m.frozen_preprocess = broadcast && !transpose_bwd && !graph && !grad;
  m.overflow = infer_overflow(s, &m.owners);
  m.body = infer_mpipe_body(s);
  return m;
}

}  // namespace

std::string to_text(const Schedule& s) {
  std::string out;
  for (int r = 0; r < s.pp(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const std::string& token : format_actions(s.ranks[r])) {
      out += ' ';
      out += token;
    }
    out += '\n';
  }
  return out;
}

std::string to_csv(const Schedule& s) {
  std::string out;
  for (int r = 0; r < s.pp(); ++r) {
    out += std::to_string(r);
    for (const std::string& token : format_actions(s.ranks[r])) {
      out += ',';
      out += token;
    }
    out += '\n';
  }
  return out;
}

Schedule from_text(const std::string& text) {
  const std::vector<std::string_view> lines = split_lines(text);
  const size_t n = content_line_count(lines);
  if (n == 0) throw std::invalid_argument("schedule text is empty; expected one line 'rank R: tokens...' per rank");
  Schedule s;
  for (size_t li = 0; li < n; ++li) {
    const int rank = static_cast<int>(li);
    const std::string where = "line " + std::to_string(li + 1);
    const std::string expected_head = "'rank " + std::to_string(rank) + ":'";
    std::string_view line = trim(lines[li]);
    if (line.empty()) fail(where, "blank line; expected " + expected_head + " (ranks are listed 0..N-1 in order)");
    const size_t colon = line.find(':');
    std::string_view head = line.substr(0, colon);
    int got = -1;
    if (colon == std::string_view::npos || head.substr(0, 4) != "rank" ||
        !parse_rank(trim(head.substr(4)), &got)) {
      fail(where, "expected the line to start with " + expected_head + ", got '" +
                      std::string(line.substr(0, std::min<size_t>(line.size(), 24))) + "'");
    }
    if (got != rank) {
      fail(where, "expected " + expected_head + " (ranks are listed 0..N-1 in order), got 'rank " +
                      std::to_string(got) + ":'");
    }
    std::vector<Action> actions;
    std::string_view rest = line.substr(colon + 1);
    size_t pos = 0;
    int index = 0;
    while (true) {
      pos = rest.find_first_not_of(" \t", pos);
      if (pos == std::string_view::npos) break;
      size_t end = rest.find_first_of(" \t", pos);
      if (end == std::string_view::npos) end = rest.size();
      ++index;
      parse_token(rest.substr(pos, end - pos), where + " (rank " + std::to_string(rank) + "), token " + std::to_string(index),
                  actions);
      pos = end;
    }
    s.ranks.push_back(std::move(actions));
  }
  check_peers(s, "line");
  infer_options(s);
  return s;
}

Schedule from_csv(const std::string& csv) {
  const std::vector<std::string_view> lines = split_lines(csv);
  const size_t n = content_line_count(lines);
  if (n == 0) throw std::invalid_argument("schedule CSV is empty; expected one row 'R,token,token,...' per rank");
  Schedule s;
  for (size_t li = 0; li < n; ++li) {
    const int rank = static_cast<int>(li);
    const std::string where = "row " + std::to_string(li + 1);
    if (trim(lines[li]).empty())
      fail(where, "blank row; expected rank " + std::to_string(rank) + " (ranks are listed 0..N-1 in order)");
    std::vector<std::string_view> cells;
    size_t pos = 0;
    while (true) {
      size_t comma = lines[li].find(',', pos);
      std::string_view cell = trim(lines[li].substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
      // Spreadsheets may quote cells; tokens never contain quotes or commas.
      if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"') cell = trim(cell.substr(1, cell.size() - 2));
      cells.push_back(cell);
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    // Spreadsheets pad short rows with empty cells up to the longest row.
    while (cells.size() > 1 && cells.back().empty()) cells.pop_back();
    int got = -1;
    if (!parse_rank(cells[0], &got)) {
      fail(where + ", cell 1", "expected the rank number " + std::to_string(rank) + ", got '" + std::string(cells[0]) + "'");
    }
    if (got != rank) {
      fail(where + ", cell 1", "expected rank " + std::to_string(rank) + " (rows are ranks 0..N-1 in order), got " +
                                   std::to_string(got));
    }
    std::vector<Action> actions;
    for (size_t c = 1; c < cells.size(); ++c) {
      const std::string cell_where = where + " (rank " + std::to_string(rank) + "), cell " + std::to_string(c + 1);
      if (cells[c].empty()) fail(cell_where, "empty cell between actions; expected an action token such as 0F3");
      parse_token(cells[c], cell_where, actions);
    }
    s.ranks.push_back(std::move(actions));
  }
  check_peers(s, "row");
  infer_options(s);
  return s;
}

void infer_options(Schedule& s) {
  const int pp = s.pp();
  if (pp == 0) throw std::invalid_argument("cannot infer the layout of a schedule with no ranks");
  int max_stage = -1;
  int max_micro = -1;
  bool mpipe = false;
  bool backward = false;
  bool split = false;  // the backward runs as I and W: a zero-bubble schedule
  bool pairs = false;  // overlapped F&B pairs: DualPipeV
  for (const auto& rank : s.ranks) {
    for (const Action& a : rank) {
      pairs = pairs || a.overlap;
      max_stage = std::max(max_stage, a.stage);
      max_micro = std::max(max_micro, a.micro);
      mpipe = mpipe || is_mpipe(a.type);
      backward = backward || is_backward(a.type);
      split = split || a.type == ActionType::BWD_I || a.type == ActionType::BWD_W;
    }
  }
  if (max_stage < 0) throw std::invalid_argument("cannot infer the layout: the schedule has no actions");
  if (max_micro < 0)
    throw std::invalid_argument("cannot infer the layout: no action names a micro-batch (expected e.g. 0F0)");
  const int stages = max_stage + 1;
  const int vpp = (stages + pp - 1) / pp;
  if (pp * vpp != stages) {
    throw std::invalid_argument("cannot infer the layout: the highest stage is " + std::to_string(max_stage) +
                                ", so there are " + std::to_string(stages) + " stages, which is not a multiple of the " +
                                std::to_string(pp) + " ranks (expected stages = pp * vpp)");
  }
  // Computes of stages beyond the first pp on row 2pp-1-stage: V placement.
  bool v_placed = vpp == 2 && pp > 1;
  for (int r = 0; r < pp && v_placed; ++r)
    for (const Action& a : s.ranks[r])
      if (is_compute(a.type) && a.stage >= pp && 2 * pp - 1 - a.stage != r) v_placed = false;
  ScheduleOptions o;
  o.pp = pp;
  o.vpp = vpp;
  o.micro_batches = max_micro + 1;
  o.group_size = 0;  // G is not recoverable from the order in general; 0 means PP
  o.layers = 0;
  o.forward_only = !backward;
  s.options = o;
  if (mpipe) {
    s.options.kind = ScheduleKind::MPipe;
    s.options.mpipe = infer_mpipe(s);
  } else if (v_placed) {
    s.options.kind = pairs ? ScheduleKind::DualPipeV : ScheduleKind::ZeroBubbleV;
  } else if (split) {
    s.options.kind = ScheduleKind::ZeroBubble1P;
  } else if (vpp > 1) {
    s.options.kind = ScheduleKind::Interleaved;
  } else if (pp == 1) {
    s.options.kind = ScheduleKind::NoPipelining;
  } else if (looks_like_gpipe(s)) {
    s.options.kind = ScheduleKind::GPipe;
  } else if (looks_like_interleaved(s)) {
    s.options.kind = ScheduleKind::Interleaved;
  } else {
    s.options.kind = ScheduleKind::OneFOneB;
  }
}

}  // namespace hp::schedule
