#include "cli/job.hpp"

#include <ATen/Parallel.h>

#include <cstdlib>
#include <string>

#include "cli/self_args.hpp"
#include "launch/launcher.hpp"

namespace hp::cli {

int run_job(const JobOptions& o, const std::function<void(int world)>& validate,
            const std::function<int(comm::ProcessGroup* pg)>& rank_main) {
  if (!comm::has_environment()) {
    const int nproc = o.nproc > 0 ? o.nproc : 4;
    validate(nproc);
    launch::LaunchOptions lo;
    lo.nproc = nproc;
    lo.command = self_args();
    return launch::launch_local(lo);
  }
  const comm::DistEnv env = comm::DistEnv::from_environment();
  if (o.nproc > 0 && o.nproc != env.world_size)
    throw std::invalid_argument("--nproc " + std::to_string(o.nproc) + " disagrees with WORLD_SIZE=" +
                                std::to_string(env.world_size));
  validate(env.world_size);
  if (const char* t = std::getenv("OMP_NUM_THREADS")) at::set_num_threads(std::max(1, std::atoi(t)));
  comm::ProcessGroupOptions pgo;
  pgo.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  std::unique_ptr<comm::ProcessGroup> pg;
  if (env.world_size > 1) pg = std::make_unique<comm::ProcessGroup>(comm::ProcessGroup::create(env, pgo));
  return rank_main(pg.get());
}

}  // namespace hp::cli
