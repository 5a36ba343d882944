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
  // through the shard (a full disk); killsave: it raises SIGKILL there.
  std::string kind = "exit";
  // The start of the job it strikes in (launch's restarts: 0 the first
  // start, n after n restarts), as a real fault strikes once; -1: every start.
  int attempt = 0;

  // Whether the plan names `rank` and `step` in start `restart` of the job.
  bool hits(int rank, std::int64_t step, int restart) const {
    return this->rank == rank && this->step == step && (attempt < 0 || attempt == restart);
  }
  // Whether the fault strikes inside a save rather than at a step's start.
  bool in_save() const { return kind == "nospace" || kind == "killsave"; }
};

// The kinds above, in the order messages list them: the one list that the
// check, the flag's form and its help read.
inline constexpr const char* kFaultKinds[] = {"exit", "hang", "kill", "stop", "nospace", "killsave"};
bool is_fault_kind(const std::string& kind);
// "exit|hang|...|killsave" with separator "|", or "exit, hang, ... or killsave" with ", ".
std::string fault_kind_names(const std::string& separator);

// At the start of a step: ends, blocks or stops this process when the plan
// names it, the step and the start (the kinds not in_save); returns otherwise.
void inject_step_fault(const FaultInjection& plan, int rank, std::int64_t step, int restart);

// Around a save: while alive, this rank's shard writes fail with ENOSPC
// (nospace) or the process gets SIGKILL (killsave) halfway through the shard
// when the plan names this rank, step and start.
class SaveFaultScope {
 public:
  SaveFaultScope(const FaultInjection& plan, int rank, std::int64_t step, int restart);
  ~SaveFaultScope();
  SaveFaultScope(const SaveFaultScope&) = delete;
  SaveFaultScope& operator=(const SaveFaultScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace hp::train
