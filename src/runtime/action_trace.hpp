// ActionTrace: what one rank's executor did, measured: each action's start and
// end on the steady clock, and inside them the waits for received data. The
// measured counterpart of the simulator's timeline (schedule/simulate.hpp).
//
// Categories: "compute" (FWD, BWD, the MPipe compute actions, broadcasts and
// MPIPE_GRAD_RECV_WITH_BACKWARD, which runs the preprocess backward), "post"
// (posting a send or a receive: the other P2P actions), "wait" (waiting for a
// received tensor inside the action that needs it, which the event's action
// names; or, with no action (micro -1), the step's last sends and its
// reductions after its actions). Events are in microseconds since the
// recorder's origin.
//
// Contract: one recorder per executor, used from the rank's thread; clear()
// between steps keeps only what the caller wants. Recording costs two clock
// reads per action.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/action.hpp"

namespace hp::runtime {

struct TraceEvent {
  std::string name;      // "2F3", "SEND_F 1->2 (3)", "wait Activation(stage 1, micro 3) from rank 1"
  std::string category;  // compute | post | wait
  schedule::Action action;  // the action it is, or runs inside (wait); micro -1: none (the step's reductions)
  double start_us = 0;
  double end_us = 0;
  std::int64_t bytes = 0;  // posts and waits: the tensor's bytes (a receive's once it arrived)
  // Compute and posts: the time spent inside waiting for received data, and
  // when the last of it had arrived (start_us when it waited for none).
  double waited_us = 0;
  double ready_us = 0;
  // The event's own work: its duration less its waits.
  double busy_us() const { return end_us - start_us - waited_us; }
};

class ActionTrace {
 public:
  using Clock = std::chrono::steady_clock;
  ActionTrace() : origin_(Clock::now()) {}

  double now_us() const { return std::chrono::duration<double, std::micro>(Clock::now() - origin_).count(); }
  void add(TraceEvent e) { events_.push_back(std::move(e)); }
  const std::vector<TraceEvent>& events() const { return events_; }
  void clear() { events_.clear(); }
  // The origin on the steady clock, in microseconds since the clock's epoch
  // (to align ranks).
  double origin_us() const {
    return std::chrono::duration<double, std::micro>(origin_.time_since_epoch()).count();
  }

 private:
  Clock::time_point origin_;
  std::vector<TraceEvent> events_;
};

// Events as one JSON array / back (to gather them on one rank).
std::string trace_events_json(const std::vector<TraceEvent>& events);
std::vector<TraceEvent> trace_events_from_json(const std::string& text);

}  // namespace hp::runtime
