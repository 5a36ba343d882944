// The measured trace of a training job's last step (hyperpipe train --trace,
// --timeline): every rank's ActionTrace, its clock aligned to rank 0's,
// gathered on rank 0 and written as one Chrome trace (a track per rank;
// compute, posts and waits as categories; bytes on communication events) and
// as an SVG timeline drawn by the simulator's renderer, optionally with the
// simulated step of the same schedule and measured costs below it.
//
// Contract: both functions are collective over `world` (null: one process).
#pragma once

#include <string>

#include "runtime/action_trace.hpp"
#include "schedule/schedule.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::train {

struct TraceOutputs {
  std::string chrome;    // --trace FILE (.json); "" = none
  std::string timeline;  // --timeline FILE (.svg); "" = none
  bool simulate = false; // --simulate: the simulated step under the measured one
};

// This rank's steady clock minus rank 0's, in microseconds, measured across a
// barrier (exact on one machine, whose ranks share the clock; within the
// barrier's skew across machines).
double clock_offset_us(comm::ProcessGroup* world);

// Writes `out` on world rank 0 from every rank's `trace`. The timeline needs
// the job's ranks to be the pipeline's (one pipeline, no tp/cp/dp).
void write_measured_trace(const runtime::ActionTrace& trace, double offset_us, comm::ProcessGroup* world,
                          const schedule::ScheduleOptions& layout, const TraceOutputs& out);

}  // namespace hp::train
