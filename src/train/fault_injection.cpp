#include "train/fault_injection.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "train/checkpoint.hpp"

namespace hp::train {

void inject_step_fault(const FaultInjection& plan, int rank, std::int64_t step) {
  if (!plan.hits(rank, step) || plan.kind == "nospace") return;
  std::cerr << "rank " << rank << ": injected fault (" << plan.kind << ") at step " << step << std::endl;
  if (plan.kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  if (plan.kind == "kill") std::raise(SIGKILL);
  if (plan.kind == "stop") std::raise(SIGSTOP);
  std::_Exit(17);
}

SaveFaultScope::SaveFaultScope(const FaultInjection& plan, int rank, std::int64_t step)
    : active_(plan.kind == "nospace" && plan.hits(rank, step)) {
  if (active_)
    set_checkpoint_write_fault([](const std::string& file, std::size_t offset, std::size_t size) {
      return file.size() > 7 && file.compare(file.size() - 7, 7, ".pt.tmp") == 0 && offset >= size / 2 ? ENOSPC : 0;
    });
}

SaveFaultScope::~SaveFaultScope() {
  if (active_) set_checkpoint_write_fault(nullptr);
}

}  // namespace hp::train
