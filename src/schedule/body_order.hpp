// The compute orders of the built-in schedules (their rows hold them:
// schedule_table.hpp) and their building blocks. Pure functions;
// thread-compatible.
#pragma once

#include <vector>

#include "schedule/schedule.hpp"
#include "schedule/schedule_table.hpp"

namespace hp::schedule {

struct MicroChunk {
  int micro = 0;
  int chunk = 0;
  friend bool operator==(const MicroChunk& a, const MicroChunk& b) {
    return a.micro == b.micro && a.chunk == b.chunk;
  }
};

// Megatron's get_schedule_table: forward op k of every rank runs entry k.
// Micro-batches are taken in groups of `group`; within a group every chunk
// runs the group's micros in order before the next chunk starts. The last
// group holds whatever is left (it may be shorter than `group`).
// Example (MB 5, v 2, G 3): (0,0)(1,0)(2,0)(0,1)(1,1)(2,1)(3,0)(4,0)(3,1)(4,1).
std::vector<MicroChunk> interleaved_table(int micro_batches, int vpp, int group);

// Forwards rank `rank` runs before its first backward under interleaved 1F1B:
// min((v-1)*G + 2*(PP-1-rank), v*MB).
int interleaved_warmup(const ScheduleOptions& o, int rank);

// Each rank's compute actions under the built-in schedules.
ComputeOrder no_pipelining_order(const ScheduleOptions& o);
ComputeOrder gpipe_order(const ScheduleOptions& o);
ComputeOrder one_f_one_b_order(const ScheduleOptions& o);
ComputeOrder interleaved_order(const ScheduleOptions& o);
ComputeOrder zero_bubble_1p_order(const ScheduleOptions& o);
ComputeOrder zero_bubble_v_order(const ScheduleOptions& o);
ComputeOrder dualpipe_v_order(const ScheduleOptions& o);

}  // namespace hp::schedule
