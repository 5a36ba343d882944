#include "schedule/render_common.hpp"

#include <cstdio>
#include <stdexcept>

namespace hp::schedule::render_detail {

BoxKind box_kind(ActionType t) {
  switch (t) {
    case ActionType::FWD: return BoxKind::Forward;
    case ActionType::BWD: return BoxKind::Backward;
    case ActionType::BWD_I: return BoxKind::InputBackward;
    case ActionType::BWD_W: return BoxKind::WeightBackward;
    case ActionType::MPIPE_TRANSPOSE_FWD: return BoxKind::TransposeFwd;
    case ActionType::MPIPE_TRANSPOSE_BWD: return BoxKind::TransposeBwd;
    case ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD: return BoxKind::GradRecvBwd;
    case ActionType::MPIPE_PARAM_BROADCAST: return BoxKind::Broadcast;
    case ActionType::MPIPE_GRAD_REDUCE: return BoxKind::GradReduce;
    default: return BoxKind::Comm;
  }
}

std::string_view box_kind_name(BoxKind k) {
  switch (k) {
    case BoxKind::Forward: return "forward";
    case BoxKind::Backward: return "backward";
    case BoxKind::InputBackward: return "input backward (I)";
    case BoxKind::WeightBackward: return "weight backward (W)";
    case BoxKind::TransposeFwd: return "transpose forward";
    case BoxKind::TransposeBwd: return "transpose backward (recompute)";
    case BoxKind::GradRecvBwd: return "owner backward (grad recv)";
    case BoxKind::Broadcast: return "param broadcast";
    case BoxKind::GradReduce: return "grad reduce";
    case BoxKind::Comm: return "send / recv";
  }
  return "?";
}

bool is_drawn(const TimedAction& t) {
  return box_kind(t.action.type) != BoxKind::Comm && t.end > t.start;
}

std::string_view category(ActionType t) {
  switch (box_kind(t)) {
    case BoxKind::Forward: return "forward";
    case BoxKind::Backward:
    case BoxKind::InputBackward:
    case BoxKind::WeightBackward: return "backward";
    case BoxKind::Broadcast:
    case BoxKind::GradReduce: return "collective";
    case BoxKind::TransposeFwd:
    case BoxKind::TransposeBwd:
    case BoxKind::GradRecvBwd: return "mpipe";
    case BoxKind::Comm: break;
  }
  return is_send(t) ? "send" : "recv";
}

int chunk_of(int stage, int pp) { return pp > 0 ? stage / pp : 0; }

std::string short_label(const Action& a, int pp, int vpp) {
  const std::string m = std::to_string(a.micro);
  switch (box_kind(a.type)) {
    case BoxKind::Forward:
    case BoxKind::Backward:
    case BoxKind::InputBackward:
    case BoxKind::WeightBackward: {
      std::string out = compute_letter(a.type) + m;
      if (vpp > 1) out += "." + std::to_string(chunk_of(a.stage, pp));
      return out;
    }
    case BoxKind::TransposeFwd: return "T" + m;
    case BoxKind::TransposeBwd: return "R" + m;
    case BoxKind::GradRecvBwd: return "G" + m;
    case BoxKind::Broadcast: return "BC";
    case BoxKind::GradReduce: return "GR";
    case BoxKind::Comm: break;
  }
  return format_action(a);
}

std::string fmt(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string title_line(const Schedule& s, const SimulationReport& r) {
  const ScheduleOptions& o = s.options;
  std::string out(kind_name(o.kind));
  out += " pp=" + std::to_string(s.pp()) + " v=" + std::to_string(o.vpp) + " mb=" + std::to_string(o.micro_batches);
  if (o.placement() == Placement::V) out += " placement=v";
  if (o.kind == ScheduleKind::MPipe) {
    if (o.mpipe.body != ScheduleKind::Interleaved) out += " body=" + std::string(kind_name(o.mpipe.body));
    out += " T=" + std::to_string(o.mpipe.transpose_layers);
    out += std::string(" overflow=") + overflow_name(o.mpipe.overflow);
    if (o.mpipe.owner_backward) out += " owner-backward";
    if (o.mpipe.frozen_preprocess) out += " frozen";
  }
  out += " | step " + fmt(r.step_time) + " ms | bubble " + fmt(100.0 * r.bubble_fraction, 1) + "%";
  return out;
}

void check_report(const Schedule& s, const SimulationReport& r) {
  if (r.ranks.size() != s.ranks.size()) {
    throw std::invalid_argument("simulation report has " + std::to_string(r.ranks.size()) +
                                " rank timelines but the schedule has " + std::to_string(s.ranks.size()) +
                                " ranks; render the report of this schedule");
  }
}

}  // namespace hp::schedule::render_detail
