// One rank of the measured trace's dist test: `measured_trace_worker FILE`,
// started by launch_local (measured_trace_dist_test.cpp). Each rank records
// one forward whose start is at the same instant of the shared steady clock
// on every rank plus 1000 µs per rank, lasting 500 µs, and writes the job's
// trace with the offset 250 µs per rank (as if its clock ran that far ahead
// of rank 0's): rank 0 gathers the ranks' events into FILE, each rank's on
// its own track, moved onto rank 0's clock. Also checks that rank 0's own
// measured offset is 0. Prints "rank R: ok"; a failure
// "rank R: FAILED: <message>" to stderr, exit 1.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "comm/dist_env.hpp"
#include "comm/process_group.hpp"
#include "rank_program.hpp"
#include "runtime/action_trace.hpp"
#include "schedule/schedule.hpp"
#include "train/measured_trace.hpp"

using namespace hp;

int main(int argc, char** argv) {
  return hp::testing::run_rank([&](int* rank_out) {
    int& rank = *rank_out;
    if (argc != 2) throw std::invalid_argument("usage: measured_trace_worker FILE");
    const comm::DistEnv env = comm::DistEnv::from_environment();
    rank = env.rank;
    at::set_num_threads(1);
    comm::ProcessGroup pg = comm::ProcessGroup::create(env, hp::testing::rank_group_options());
    const double offset = train::clock_offset_us(&pg);
    if (rank == 0 && offset != 0) throw std::runtime_error("rank 0's clock offset is " + std::to_string(offset));
    if (!std::isfinite(offset)) throw std::runtime_error("clock offset " + std::to_string(offset));

    runtime::ActionTrace trace;
    const double instant = 1e6;  // µs on the steady clock, the same on every rank
    const double start = instant + 1000.0 * rank - trace.origin_us();
    runtime::TraceEvent f{"F on rank " + std::to_string(rank), "compute", {schedule::ActionType::FWD, rank, 0, -1},
                          start, start + 500};
    f.ready_us = start;
    trace.add(f);
    schedule::ScheduleOptions layout;
    layout.kind = schedule::ScheduleKind::OneFOneB;
    layout.pp = pg.world_size();
    layout.micro_batches = 1;
    train::TraceOutputs out;
    out.chrome = argv[1];
    train::write_measured_trace(trace, 250.0 * rank, &pg, layout, out);
    std::printf("rank %d: ok\n", rank);
    return 0;
  });
}
