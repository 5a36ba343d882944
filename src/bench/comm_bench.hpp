// `hyperpipe bench --comm`: src/comm's point-to-point messages and broadcast
// against plain c10d Gloo of the same sizes (comm/c10d_baseline.hpp). Every
// round times the two, and a second plain c10d group, back to back in a
// rotating order; the ratios are taken per round, so machine load that moves
// between rounds falls on both sides of each ratio, and the second c10d group
// against the first shows what this machine's noise alone gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/spread.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::bench {

struct CommBenchRow {
  std::string op;  // "p2p" (rank 0 <-> rank 1 ping-pong) or "broadcast" (from rank 0 to all)
  std::int64_t bytes = 0;
  double hyperpipe_us = 0;  // one message (p2p: one way), the median of the rounds
  double c10d_us = 0;
  Spread ratio;    // per round, c10d's time over hyperpipe's: hyperpipe's throughput as a fraction (goal >= 0.95)
  Spread control;  // per round, c10d's time over the second c10d group's: the same path against itself
};

// Collective over the job's group (at least two ranks); the times are rank 0's.
std::vector<CommBenchRow> bench_comm(comm::ProcessGroup& group, int rounds);

// The table rank 0 prints.
std::string format_comm_rows(const std::vector<CommBenchRow>& rows, int rounds);

}  // namespace hp::bench
