// How a subcommand becomes a job: with the torchrun variables set this process
// is one rank; otherwise it starts `nproc` local ranks of the same command
// line and waits for them (the first failing rank's status is the job's).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/dist_env.hpp"
#include "cli/job_options.hpp"
#include "cli/option_flags.hpp"
#include "comm/process_group.hpp"

namespace hp::cli {

// Before starting nproc local ranks: refuses (std::invalid_argument naming
// --nproc) more than the machine's available memory holds at a rank process's
// own cost; warns on stderr when they outnumber the cores four times over.
void check_local_ranks_fit(int nproc);

// validate(world) runs before anything starts (in the launcher, and again in
// each rank before its process group exists); rank_main runs in each rank
// with its process group (null for a one-rank job). Returns the exit code.
int run_job(const JobOptions& o, const std::function<void(int world)>& validate,
            const std::function<int(comm::ProcessGroup* pg)>& rank_main);

// Rank 0's first line of train and bench: the BLAS the products run on and the
// OpenMP threads each rank's products and loops share; on the reference BLAS
// one warning line on stderr names the package to install.
void print_blas_line(comm::ProcessGroup* pg);

// run_job for a subcommand's callback: any exception becomes one line,
// "hyperpipe COMMAND: error: ..." with option names turned into the
// command's flags, and the exit code 2 before any rank started, 1 in a rank.
int run_job_reporting(const std::string& command, const FlagNames& flags, const JobOptions& o,
                      const std::function<void(int world)>& validate,
                      const std::function<int(comm::ProcessGroup* pg)>& rank_main);

}  // namespace hp::cli
