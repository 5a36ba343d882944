// `hyperpipe bench --comm`: src/comm's point-to-point messages and broadcast
// against plain c10d Gloo of the same sizes (comm/c10d_baseline.hpp), each
// pair measured alternately in one run so machine load falls on both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hp::comm {
class ProcessGroup;
}

namespace hp::cli {

struct CommBenchRow {
  std::string op;  // "p2p" (rank 0 <-> rank 1 ping-pong) or "broadcast" (from rank 0 to all)
  std::int64_t bytes = 0;
  double hyperpipe_us = 0;  // one message (p2p: one way), the best of the rounds
  double c10d_us = 0;
  // hyperpipe's throughput as a fraction of c10d's (goal >= 0.95).
  double ratio() const { return c10d_us / hyperpipe_us; }
};

// Collective over the job's group (at least two ranks); the times are rank 0's.
std::vector<CommBenchRow> bench_comm(comm::ProcessGroup& group, int rounds = 6);

// The table rank 0 prints.
std::string format_comm_rows(const std::vector<CommBenchRow>& rows);

}  // namespace hp::cli
