// The compute order of the body pipeline (no-pipelining, GPipe, 1F1B,
// interleaved 1F1B): building blocks of body_compute_order (generate.hpp).
// Pure functions; thread-compatible.
#pragma once

#include <vector>

#include "schedule/schedule.hpp"

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

}  // namespace hp::schedule
