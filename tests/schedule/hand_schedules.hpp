// Hand-written schedules for the schedule tests, independent of the generators.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "schedule/generate.hpp"
#include "schedule/schedule.hpp"
#include "schedule/simulate.hpp"

namespace hp::schedule::testing {

// Actions [begin, end) in their text form, one space apart.
inline std::string text(const std::vector<Action>& actions, size_t begin = 0, size_t end = ~size_t{0}) {
  std::string out;
  for (size_t i = begin; i < std::min(end, actions.size()); ++i)
    out += (out.empty() ? "" : " ") + format_action(actions[i]);
  return out;
}

// Each rank's compute actions as one line of tokens ("0F0 0I0 0W0"), an
// overlapped pair as one token ("(1F1;2B0)").
inline std::vector<std::string> compute_text(const Schedule& s) {
  std::vector<std::string> out;
  for (const auto& rank : filter(s, is_compute).ranks) {
    std::string line;
    for (const std::string& tok : format_actions(rank)) line += (line.empty() ? "" : " ") + tok;
    out.push_back(line);
  }
  return out;
}

// Where a is in actions, or -1.
inline int position(const std::vector<Action>& actions, const Action& a) {
  auto it = std::find(actions.begin(), actions.end(), a);
  return it == actions.end() ? -1 : static_cast<int>(it - actions.begin());
}

// A layout for the generators: kind, ranks, chunks per rank, micro-batches; the rest default.
inline ScheduleOptions layout(ScheduleKind kind, int pp, int vpp, int mb) {
  ScheduleOptions o;
  o.kind = kind;
  o.pp = pp;
  o.vpp = vpp;
  o.micro_batches = mb;
  return o;
}

// Every stage F forward and B backward (the split halves by default).
inline CostModel uniform(double f, double b) {
  CostModel c;
  c.f = f;
  c.b = b;
  return c;
}

// A schedule from one line of action tokens per rank.
inline Schedule from_text(int pp, int micro_batches, const std::vector<std::string>& lines, int vpp = 1) {
  Schedule s;
  s.options.kind = ScheduleKind::OneFOneB;
  s.options.pp = pp;
  s.options.vpp = vpp;
  s.options.micro_batches = micro_batches;
  for (const std::string& line : lines) {
    std::istringstream in(line);
    s.ranks.emplace_back();
    for (std::string tok; in >> tok;) {
      std::string err;
      EXPECT_TRUE(parse_actions(tok, s.ranks.back(), &err)) << err;
    }
  }
  return s;
}

// One chunk per rank, Megatron-style comms: each forward is preceded by its
// receive and followed by its send, each backward likewise, so the steady
// state posts SEND_F+RECV_B and SEND_B+RECV_F as single batches. `warmup(r)`
// forwards run before rank r's first backward.
template <typename Warmup>
inline Schedule hand_pipeline(int pp, int mb, Warmup warmup) {
  Schedule s;
  s.options.kind = ScheduleKind::OneFOneB;
  s.options.pp = pp;
  s.options.micro_batches = mb;
  s.ranks.resize(pp);
  for (int r = 0; r < pp; ++r) {
    auto& out = s.ranks[r];
    auto fwd = [&](int m) {
      if (r > 0) out.push_back({ActionType::RECV_F, r, m, r - 1});
      out.push_back({ActionType::FWD, r, m});
      if (r < pp - 1) out.push_back({ActionType::SEND_F, r, m, r + 1});
    };
    auto bwd = [&](int m) {
      if (r < pp - 1) out.push_back({ActionType::RECV_B, r, m, r + 1});
      out.push_back({ActionType::BWD, r, m});
      if (r > 0) out.push_back({ActionType::SEND_B, r, m, r - 1});
    };
    const int w = warmup(r);
    int f = 0, b = 0;
    while (f < w) fwd(f++);
    while (f < mb) fwd(f++), bwd(b++);
    while (b < mb) bwd(b++);
  }
  return s;
}

inline Schedule hand_1f1b(int pp, int mb) {
  return hand_pipeline(pp, mb, [&](int r) { return std::min(pp - r - 1, mb); });
}
inline Schedule hand_gpipe(int pp, int mb) {
  return hand_pipeline(pp, mb, [&](int) { return mb; });
}

// PP=2 MPipe with owner-backward: rank 1 owns micro 1, rank 0 ships it
// dL/dfeatures, both reduce.
inline Schedule owner_backward_pp2() {
  return from_text(
      2, 2,
      {
          "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD0 0MPIPE_FWD_RECV1@1 "
          "0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0MPIPE_TRANSPOSE_BWD0 0RECV_B1@1 0B1 "
          "0MPIPE_GRAD_SEND1@1 0MPIPE_GRAD_REDUCE",
          "0MPIPE_PARAM_BROADCAST 0MPIPE_TRANSPOSE_FWD1 0MPIPE_FWD_SEND1@0 "
          "1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0 "
          "0MPIPE_GRAD_RECV_WITH_BACKWARD1@0 0MPIPE_GRAD_REDUCE",
      });
}

// The message check_options throws, or "" when it accepts.
inline std::string rejection(const ScheduleOptions& o) {
  try {
    check_options(o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace hp::schedule::testing
