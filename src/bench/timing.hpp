// The bench engine's clocks: a timed pass with the tensor-parallel
// all-reduces made inside it, and the mean of repeated runs.
#pragma once

#include <chrono>
#include <functional>

#include "schedule/simulate.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::bench {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0);

// One timed pass (a forward or a backward) and the tensor-parallel
// all-reduces made inside it: ms in all, and calls, bytes and ms of those.
struct Pass {
  double ms = 0;
  schedule::Collectives tp;
  double tp_ms = 0;
};

// Times `run`, counting the blocking all-reduces it makes over `tp` (may be null).
Pass timed_pass(comm::ProcessGroup* tp, const std::function<void()>& run);

// The mean time of `reps` runs of `op` (after three untimed, which grow the
// heap), in ms: the mean, not the best or the median, because a step pays
// for its slow collectives too (a peer descheduled now and then; here one
// 25 MiB average in four or five takes 130 ms, not 25). Each run follows
// `after_ms` of sleep: after an emulated layer, as the tensor-parallel
// all-reduces meet one in a step, the peers wake at different times and the
// first to arrive waits.
double mean_ms(int reps, double after_ms, const std::function<void()>& op);

}  // namespace hp::bench
