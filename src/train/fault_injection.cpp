#include "train/fault_injection.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <thread>

#include "train/checkpoint.hpp"

namespace hp::train {

bool is_fault_kind(const std::string& kind) {
  for (const char* k : kFaultKinds)
    if (kind == k) return true;
  return false;
}

std::string fault_kind_names(const std::string& separator) {
  std::string out;
  const std::size_t n = std::size(kFaultKinds);
  for (std::size_t i = 0; i < n; ++i)
    out += (i == 0 ? "" : separator == ", " && i + 1 == n ? std::string(" or ") : separator) + kFaultKinds[i];
  return out;
}

void inject_step_fault(const FaultInjection& plan, int rank, std::int64_t step, int restart) {
  if (!plan.hits(rank, step, restart) || plan.in_save()) return;
  std::cerr << "rank " << rank << ": injected fault (" << plan.kind << ") at step " << step << std::endl;
  if (plan.kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  if (plan.kind == "kill") std::raise(SIGKILL);
  if (plan.kind == "stop") std::raise(SIGSTOP);
  std::_Exit(17);
}

SaveFaultScope::SaveFaultScope(const FaultInjection& plan, int rank, std::int64_t step, int restart)
    : active_(plan.in_save() && plan.hits(rank, step, restart)) {
  if (!active_) return;
  auto halfway = [](const std::string& file, std::size_t offset, std::size_t size) {
    return file.size() > 7 && file.compare(file.size() - 7, 7, ".pt.tmp") == 0 && offset >= size / 2;
  };
  if (plan.kind == "nospace")
    set_checkpoint_write_fault([halfway](const std::string& file, std::size_t offset, std::size_t size) {
      return halfway(file, offset, size) ? ENOSPC : 0;
    });
  else
    set_checkpoint_write_fault([halfway, rank](const std::string& file, std::size_t offset, std::size_t size) {
      if (halfway(file, offset, size)) {
        std::cerr << "rank " << rank << ": injected fault (killsave) writing " << file << std::endl;
        std::raise(SIGKILL);
      }
      return 0;
    });
}

SaveFaultScope::~SaveFaultScope() {
  if (active_) set_checkpoint_write_fault(nullptr);
}

}  // namespace hp::train
