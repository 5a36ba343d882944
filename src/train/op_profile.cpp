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
  // A range's pop carries its push's handle but need not follow it in LIFO order, nor on the same
  // thread: c10d ends a gloo:send range where the send completes. So ranges are paired by handle,
  // as PyTorch's own parser does, and nested by their intervals on the thread that opened them.
  struct Range {
    const prof::LegacyEvent* push;
    double start_us = 0, end_us = 0, children_us = 0;
  };
  const prof::LegacyEvent* origin = nullptr;
  std::map<std::pair<at::RecordFunctionHandle, int>, const prof::LegacyEvent*> open;
  std::map<std::uint64_t, std::vector<Range>> by_thread;
  for (const auto& list : lists)
    for (const auto& e : list) {
      if (origin == nullptr) origin = &e;
      const auto key = std::make_pair(e.handle(), e.nodeId());
      if (e.kind() == prof::EventKind::PushRange) {
        open[key] = &e;
      } else if (e.kind() == prof::EventKind::PopRange) {
        const auto it = open.find(key);
        if (it == open.end()) continue;
        const prof::LegacyEvent* push = it->second;
        open.erase(it);
        by_thread[push->threadId()].push_back({push, origin->cpuElapsedUs(*push), origin->cpuElapsedUs(e)});
      }
    }
  std::map<std::string, OpTime> by_name;
  auto account = [&](const Range& r) {
    OpTime& t = by_name[r.push->name()];
    t.name = r.push->name();
    ++t.calls;
    t.total_us += r.end_us - r.start_us;
    t.self_us += r.end_us - r.start_us - r.children_us;
  };
  for (auto& [thread, ranges] : by_thread) {
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
      return a.start_us != b.start_us ? a.start_us < b.start_us : a.end_us > b.end_us;
    });
    // A range is a child of the innermost open range that contains it; one that only overlaps
    // (an async range's end) closes the ranges it outlives.
    std::vector<Range> stack;
    for (const Range& r : ranges) {
      while (!stack.empty() && r.end_us > stack.back().end_us) {
        account(stack.back());
        stack.pop_back();
      }
      if (!stack.empty()) stack.back().children_us += r.end_us - r.start_us;
      stack.push_back(r);
    }
    for (; !stack.empty(); stack.pop_back()) account(stack.back());
  }
  std::vector<OpTime> out;
  for (auto& [name, t] : by_name) out.push_back(std::move(t));
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.self_us > b.self_us; });
  return out;
}

}  // namespace hp::train
