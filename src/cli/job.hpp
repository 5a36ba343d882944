// How a subcommand becomes a job: with the torchrun variables set this process
// is one rank; otherwise it starts `nproc` local ranks of the same command
// line and waits for them (the first failing rank's status is the job's).
#pragma once

#include <functional>
#include <memory>

#include "comm/dist_env.hpp"
#include "comm/process_group.hpp"

namespace hp::cli {

struct JobOptions {
  int nproc = 0;            // local ranks when not already a rank (0: 4); as a rank, must equal WORLD_SIZE if set
  double timeout_s = 300;   // every collective and P2P operation
};

// validate(world) runs before anything starts (in the launcher, and again in
// each rank before its process group exists); rank_main runs in each rank
// with its process group (null for a one-rank job). Returns the exit code.
int run_job(const JobOptions& o, const std::function<void(int world)>& validate,
            const std::function<int(comm::ProcessGroup* pg)>& rank_main);

}  // namespace hp::cli
