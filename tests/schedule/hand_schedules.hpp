// Hand-written schedules for the schedule tests, independent of the generators.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::schedule::testing {

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
      auto a = parse_action(tok, &err);
      EXPECT_TRUE(a.has_value()) << err;
      if (a) s.ranks.back().push_back(*a);
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

}  // namespace hp::schedule::testing
