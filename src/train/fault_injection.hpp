// FaultInjection: makes one rank fail on purpose, so the job's fault handling
// (peers time out or see the dead connection, the launcher names the rank, a
// failed save stops the job) can be exercised end to end.
//
// Contract: every rank holds the same plan; only the rank it names acts on
// it, from the training loop's thread.
#pragma once

#include <cstdint>
#include <string>

namespace hp::train {

struct FaultInjection {
  int rank = -1;  // -1: none
  std::int64_t step = 0;
  // exit: the process ends with code 17; hang: it blocks forever; kill, stop:
  // it raises SIGKILL or SIGSTOP (every thread stops, the heartbeat's too);
  // nospace: its checkpoint writes at that step fail with ENOSPC halfway
  // through the shard (a full disk).
  std::string kind = "exit";

  // Whether the plan names `rank` and `step`.
  bool hits(int rank, std::int64_t step) const { return this->rank == rank && this->step == step; }
};

// At the start of a step: ends, blocks or stops this process when the plan
// names it and the step (every kind but nospace); returns otherwise.
void inject_step_fault(const FaultInjection& plan, int rank, std::int64_t step);

// Around a save: while alive, this rank's shard writes fail with ENOSPC
// halfway when the plan says nospace at this rank and step.
class SaveFaultScope {
 public:
  SaveFaultScope(const FaultInjection& plan, int rank, std::int64_t step);
  ~SaveFaultScope();
  SaveFaultScope(const SaveFaultScope&) = delete;
  SaveFaultScope& operator=(const SaveFaultScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace hp::train
