#include "bench/timing.hpp"

#include <thread>

#include "comm/process_group.hpp"

namespace hp::bench {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

Pass timed_pass(comm::ProcessGroup* tp, const std::function<void()>& run) {
  const comm::CommCounters before = tp ? tp->counters() : comm::CommCounters{};
  const auto t0 = Clock::now();
  run();
  Pass p{ms_since(t0), {}, 0};
  if (tp) {
    const comm::CommCounters after = tp->counters();
    p.tp = {static_cast<int>(after.all_reduces - before.all_reduces),
            static_cast<double>(after.all_reduce_bytes - before.all_reduce_bytes)};
    p.tp_ms = (after.all_reduce_us - before.all_reduce_us) / 1000;
  }
  return p;
}

double mean_ms(int reps, double after_ms, const std::function<void()>& op) {
  constexpr int kWarmUp = 3;
  double total = 0;
  for (int r = 0; r < kWarmUp + reps; ++r) {
    if (after_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(after_ms));
    const auto t0 = Clock::now();
    op();
    if (r >= kWarmUp) total += ms_since(t0);
  }
  return total / reps;
}

}  // namespace hp::bench
