#include "train/op_profile.hpp"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <map>

namespace hp::train {

namespace prof = torch::autograd::profiler;

OpProfile::OpProfile() {
  prof::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  on_ = true;
}

OpProfile::~OpProfile() {
  if (on_) prof::disableProfilerLegacy();
}

std::vector<OpTime> OpProfile::stop() {
  on_ = false;
  const prof::thread_event_lists lists = prof::disableProfilerLegacy();
  std::map<std::string, OpTime> by_name;
  struct Open {
    const prof::LegacyEvent* push;
    double children_us;
  };
  for (const auto& list : lists) {
    // Each thread's pushes and pops nest; a pop closes the latest push.
    std::vector<Open> open;
    for (const auto& e : list) {
      if (e.kind() == prof::EventKind::PushRange) {
        open.push_back({&e, 0.0});
      } else if (e.kind() == prof::EventKind::PopRange && !open.empty()) {
        const Open o = open.back();
        open.pop_back();
        const double us = o.push->cpuElapsedUs(e);
        OpTime& t = by_name[o.push->name()];
        t.name = o.push->name();
        ++t.calls;
        t.total_us += us;
        t.self_us += us - o.children_us;
        if (!open.empty()) open.back().children_us += us;
      }
    }
  }
  std::vector<OpTime> out;
  for (auto& [name, t] : by_name) out.push_back(std::move(t));
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.self_us > b.self_us; });
  return out;
}

}  // namespace hp::train
