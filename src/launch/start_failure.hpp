// StartFailure: what ended one start of a job's ranks, as the launcher that
// saw it records it (group_start.hpp) and, over several nodes, as every
// launcher reads it back from the store (node_group.hpp). A value type.
#pragma once

#include <cstdint>
#include <string>

namespace hp::launch {

struct StartFailure {
  std::string reason;             // "rank 3 failed with signal 9 (SIGKILL)", "node 1's launcher was lost ..."
  bool restartable = true;        // false: the job ends (a signal to a launcher, a full disk, ...)
  std::int64_t failed_at_ms = 0;  // when it was seen, ms since the epoch (a lost launcher: when read); 0: unknown
};

}  // namespace hp::launch
