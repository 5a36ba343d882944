// The process group a test worker joins: the launcher's environment, one
// intra-op thread (ranks share two cores), the timeout from HP_TIMEOUT_S (30 s).
#pragma once

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>

#include "comm/dist_env.hpp"
#include "comm/process_group.hpp"

namespace hp::testing {

inline comm::ProcessGroup join_worker_group() {
  at::set_num_threads(1);
  comm::ProcessGroupOptions pgo;
  const char* t = std::getenv("HP_TIMEOUT_S");
  pgo.timeout = std::chrono::seconds(t ? std::atoi(t) : 30);
  return comm::ProcessGroup::create(comm::DistEnv::from_environment(), pgo);
}

}  // namespace hp::testing
