// Shared vocabulary of the renderers (render.hpp): which timed actions are
// drawn as boxes, their kind, short labels and the title line. Internal to
// src/schedule; pure functions, thread-compatible.
#pragma once

#include <string>

#include "schedule/simulate.hpp"

namespace hp::schedule::render_detail {

// What a box on a timeline shows. Point-to-point transfers other than the
// owner-backward receive are Comm: they take no rank time of their own and
// are drawn as ticks or not at all.
enum class BoxKind {
  Forward,
  Backward,
  InputBackward,   // BWD_I: the split backward's input gradient
  WeightBackward,  // BWD_W: the split backward's weight gradients
  TransposeFwd,   // MPIPE_TRANSPOSE_FWD: preprocess forward (or data load) on the owner
  TransposeBwd,   // MPIPE_TRANSPOSE_BWD: recompute + backprop of the preprocess on rank 0
  GradRecvBwd,    // MPIPE_GRAD_RECV_WITH_BACKWARD: the owner backprops its retained graph
  Broadcast,      // MPIPE_PARAM_BROADCAST
  GradReduce,     // MPIPE_GRAD_REDUCE
  Comm,
};
inline constexpr int kNumBoxKinds = 10;
// The pipeline body's computes, drawn per chunk (F, B, I, W).
inline bool is_body(BoxKind k) { return k <= BoxKind::WeightBackward; }

BoxKind box_kind(ActionType t);
std::string_view box_kind_name(BoxKind k);  // legend text, e.g. "transpose forward"

// Compute-like (every kind but Comm) and of positive duration: the actions a
// timeline draws as boxes.
bool is_drawn(const TimedAction& t);

// Chrome trace category: forward, backward, send, recv, mpipe or collective.
std::string_view category(ActionType t);

// The chunk (virtual stage on its rank) of an action, with pp = physical ranks.
int chunk_of(int stage, int pp);

// Grid label: "F3" / "B3" / "I3" / "W3", "F3.1" (micro 3, chunk 1) when vpp > 1; "T3"
// transpose forward, "R3" recompute backward, "G3" owner grad backward, "BC"
// broadcast, "GR" grad reduce.
std::string short_label(const Action& a, int pp, int vpp);

// "1f1b pp=4 v=1 mb=8 | step 33 ms | bubble 27.3%" (MPipe adds its options).
std::string title_line(const Schedule& s, const SimulationReport& r);

// Compact decimal: at most `digits` decimals, trailing zeros dropped.
std::string fmt(double v, int digits = 3);

// Throws std::invalid_argument unless the report has one timeline per rank.
void check_report(const Schedule& s, const SimulationReport& r);

}  // namespace hp::schedule::render_detail
