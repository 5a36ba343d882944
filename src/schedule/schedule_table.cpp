#include "schedule/schedule_table.hpp"

#include <algorithm>
#include <deque>
#include <stdexcept>

#include "schedule/body_order.hpp"
#include "schedule/simulate.hpp"

namespace hp::schedule {
namespace {

// Megatron's (PP-1)/(v MB): GPipe, 1F1B and interleaved 1F1B.
std::optional<double> megatron_bubble(const ScheduleOptions& o, const StageCost&) {
  if (o.pp < 2) return std::nullopt;
  return static_cast<double>(o.pp - 1) / (o.vpp * o.micro_batches);
}

// ZB-H1's (PP-1)(F+B-2W) over MB (F+B); the zero-bubble paper states none
// for its interleaved form.
std::optional<double> zb_h1_bubble(const ScheduleOptions& o, const StageCost& c) {
  if (o.vpp != 1 || o.pp < 2) return std::nullopt;
  return (o.pp - 1) * (c.f + c.b - 2 * c.weight_backward()) / (o.micro_batches * (c.f + c.b));
}

// DualPipe's (PP-1)(F&B+B-3W) over 2 MB (F+B), with F&B = F + B on one
// thread and a forward longer than I adding F - I a rank
// (tests/schedule/dualpipe_v_test.cpp).
std::optional<double> dualpipe_bubble(const ScheduleOptions& o, const StageCost& c) {
  const double longer_forward = std::max(0.0, c.f - c.input_backward());
  return (o.pp - 1) * (c.f + 2 * c.b - 3 * c.weight_backward() + longer_forward) /
         (2 * o.micro_batches * (c.f + c.b));
}

std::string refuse_no_pipelining(const ScheduleOptions& o) {
  if (o.pp == 1 && o.vpp == 1) return "";
  return "no-pipelining runs one stage: use schedule.pp 1 schedule.vpp 1 (got schedule.pp " + std::to_string(o.pp) +
         " schedule.vpp " + std::to_string(o.vpp) + ")";
}

// PyTorch's and DeepSeek's DualPipeV need every stage busy in the steady
// phase: rank 0 warms up 2 PP deep before its first pair.
std::string refuse_dualpipe_v(const ScheduleOptions& o) {
  if (o.micro_batches >= 2 * o.pp) return "";
  return "schedule.kind dualpipev needs schedule.micro_batches >= 2 x schedule.pp = " + std::to_string(2 * o.pp) +
         " (one per stage; got schedule.micro_batches " + std::to_string(o.micro_batches) +
         "); use more micro-batches, or schedule.kind zbv, which takes any";
}

// The built-in rows, in ScheduleKind's order (a row's index is its kind).
std::deque<ScheduleRow> built_in_rows() {
  std::deque<ScheduleRow> rows;
  ScheduleRow r;
  r = {};
  r.name = "no-pipelining";
  r.help = "one rank runs every stage (the single-process reference)";
  r.order = no_pipelining_order;
  r.refuse = refuse_no_pipelining;
  r.advised_from_vpp = 0;
  r.mpipe_body = false;
  r.pipelined = false;
  rows.push_back(r);
  r = {};
  r.name = "gpipe";
  r.help = "every forward, then every backward (Huang et al. 2019)";
  r.order = gpipe_order;
  r.theory_bubble = megatron_bubble;
  r.advised_from_vpp = 0;
  rows.push_back(r);
  r = {};
  r.name = "1f1b";
  r.help = "one forward, one backward (PipeDream-Flush, Megatron's default)";
  r.order = one_f_one_b_order;
  r.theory_bubble = megatron_bubble;
  rows.push_back(r);
  r = {};
  r.name = "interleaved";
  r.help = "interleaved 1F1B over several chunks per rank (Megatron's virtual pipeline)";
  r.order = interleaved_order;
  r.default_vpp = 2, r.max_vpp = 0;
  r.grouped = true;
  r.theory_bubble = megatron_bubble;
  r.advised_from_vpp = 2;  // at v 1 it is 1F1B
  rows.push_back(r);
  r = {};
  r.name = "mpipe";
  r.help = "MPipe Transpose around a body (interleaved 1F1B unless another is named)";
  r.max_vpp = 0;
  r.grouped = true;
  r.mpipe_body = false;
  rows.push_back(r);  // the advisor ranks MPipe around each body itself
  r = {};
  r.name = "zb1p";
  r.help = "zero bubble: ZB-H1 at v 1, PyTorch's interleaved zero bubble at any v (I and W split)";
  r.order = zero_bubble_1p_order;
  r.max_vpp = 0;
  r.grouped = true;
  r.splits_backward = true;
  r.theory_bubble = zb_h1_bubble;
  rows.push_back(r);
  r = {};
  r.name = "zbv";
  r.help = "zero bubble in V placement (PyTorch's ScheduleZBVZeroBubble), two chunks per rank";
  r.order = zero_bubble_v_order;
  r.default_vpp = r.min_vpp = r.max_vpp = 2;
  r.placement = Placement::V;
  r.splits_backward = true;
  r.advised_from_vpp = 2;
  rows.push_back(r);
  r = {};
  r.name = "dualpipev";
  r.help = "DeepSeek's DualPipeV (PyTorch's ScheduleDualPipeV): V placement, overlapped F&B pairs, MB >= 2 PP";
  r.order = dualpipe_v_order;
  r.default_vpp = r.min_vpp = r.max_vpp = 2;
  r.placement = Placement::V;
  r.splits_backward = true;
  r.refuse = refuse_dualpipe_v;
  r.theory_bubble = dualpipe_bubble;
  r.advised_from_vpp = 2;
  rows.push_back(r);
  return rows;
}

// A deque: a row's address (and its name's, which kind_name hands out) stays
// put as rows are added.
std::deque<ScheduleRow>& table() {
  static std::deque<ScheduleRow> rows = built_in_rows();
  return rows;
}

}  // namespace

ScheduleKind register_schedule(ScheduleRow row) {
  if (row.name.empty()) throw std::invalid_argument("register_schedule: a schedule needs a name");
  ScheduleKind taken;
  for (const std::string& n : [&] {
         std::vector<std::string> all = row.aliases;
         all.insert(all.begin(), row.name);
         return all;
       }())
    if (kind_from_name(n, &taken))
      throw std::invalid_argument("register_schedule: the name " + n + " is taken by schedule " +
                                  std::string(kind_name(taken)));
  if (!row.order) throw std::invalid_argument("register_schedule: schedule " + row.name + " has no compute order");
  if (!row.runs_vpp(row.default_vpp))
    throw std::invalid_argument("register_schedule: schedule " + row.name + "'s default vpp " + std::to_string(row.default_vpp) +
                                " is outside its range");
  table().push_back(std::move(row));
  return static_cast<ScheduleKind>(table().size() - 1);
}

const ScheduleRow& schedule_row(ScheduleKind kind) { return table().at(static_cast<std::size_t>(kind)); }

std::vector<ScheduleKind> schedule_kinds() {
  std::vector<ScheduleKind> out;
  for (std::size_t i = 0; i < table().size(); ++i) out.push_back(static_cast<ScheduleKind>(i));
  return out;
}

bool splits_backward(ScheduleKind k) { return schedule_row(k).splits_backward; }
bool placed_in_v(ScheduleKind k) { return schedule_row(k).placement == Placement::V; }
bool is_mpipe_body(ScheduleKind k) { return schedule_row(k).mpipe_body; }
std::string_view kind_name(ScheduleKind k) { return schedule_row(k).name; }

bool kind_from_name(std::string_view name, ScheduleKind* out) {
  for (ScheduleKind k : schedule_kinds()) {
    const ScheduleRow& r = schedule_row(k);
    if (r.name == name || std::find(r.aliases.begin(), r.aliases.end(), name) != r.aliases.end()) {
      *out = k;
      return true;
    }
  }
  return false;
}

std::vector<std::string> kind_name_list() {
  std::vector<std::string> out;
  for (ScheduleKind k : schedule_kinds()) out.push_back(schedule_row(k).name);
  return out;
}

std::vector<std::string> kind_names_and_aliases() {
  std::vector<std::string> out;
  for (ScheduleKind k : schedule_kinds()) {
    out.push_back(schedule_row(k).name);
    for (const std::string& a : schedule_row(k).aliases) out.push_back(a);
  }
  return out;
}

std::vector<std::string> mpipe_body_name_list() {
  std::vector<std::string> out;
  for (ScheduleKind k : schedule_kinds())
    if (schedule_row(k).mpipe_body) out.push_back(schedule_row(k).name);
  return out;
}

namespace {
std::string comma_joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

std::string kind_names() { return comma_joined(kind_name_list()); }
std::string mpipe_body_names() { return comma_joined(mpipe_body_name_list()); }

int default_vpp(const ScheduleOptions& o) {
  return schedule_row(o.kind == ScheduleKind::MPipe ? o.mpipe.body : o.kind).default_vpp;
}

}  // namespace hp::schedule
