#include "train/op_profile.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <set>

namespace hp::train {
namespace {

namespace prof = torch::autograd::profiler;
namespace impl = torch::profiler::impl;

// The profiler PyTorch's torch.profiler (and autograd.profiler.profile) runs,
// CPU only; it works without libkineto. The legacy profiler costs far more
// per event: on this kind of machine it doubled the step it profiled.
impl::ProfilerConfig cpu_config() { return impl::ProfilerConfig(impl::ProfilerState::KINETO); }
const std::set<impl::ActivityType>& cpu_only() {
  static const std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
  return activities;
}

// An event's start and length in µs: LibTorch 1.13 gives µs, later versions ns.
template <class E>
auto start_us(const E& e, int) -> decltype(e.startNs(), double()) { return e.startNs() / 1000.0; }
template <class E>
double start_us(const E& e, long) { return static_cast<double>(e.startUs()); }
template <class E>
auto duration_us(const E& e, int) -> decltype(e.durationNs(), double()) { return e.durationNs() / 1000.0; }
template <class E>
double duration_us(const E& e, long) { return static_cast<double>(e.durationUs()); }

}  // namespace

OpProfile::OpProfile() {
  prof::prepareProfiler(cpu_config(), cpu_only());
  prof::enableProfiler(cpu_config(), cpu_only());
  on_ = true;
}

OpProfile::~OpProfile() {
  if (on_) prof::disableProfiler();
}

std::vector<OpTime> OpProfile::stop() {
  on_ = false;
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  // Each event is an interval on the thread that opened it; c10d's gloo:send
  // ranges close where the send completes, on another thread, and still come
  // as one interval. Ranges nest by their intervals per thread.
  struct Range {
    std::string name;
    double start_us = 0, end_us = 0, children_us = 0;
  };
  std::map<std::uint64_t, std::vector<Range>> by_thread;
  for (const auto& e : result->events()) {
    const double start = start_us(e, 0);
    by_thread[e.startThreadId()].push_back({e.name(), start, start + duration_us(e, 0)});
  }
  std::map<std::string, OpTime> by_name;
  auto account = [&](const Range& r) {
    OpTime& t = by_name[r.name];
    t.name = r.name;
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
