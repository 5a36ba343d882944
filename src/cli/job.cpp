#include "cli/job.hpp"

#include <ATen/Parallel.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>

#include "cli/self_args.hpp"
#include "train/memory_estimate.hpp"
#include "comm/heartbeat.hpp"
#include "launch/error_file.hpp"
#include "launch/launcher.hpp"
#include "model/param_init.hpp"
#include "runtime/blas_library.hpp"
#include "runtime/tensor_memory.hpp"

namespace hp::cli {

void check_local_ranks_fit(int nproc) {
  // A rank process's own memory before any model (LibTorch, Gloo, threads):
  // about 60 MiB private, measured with LibTorch 1.13 on a 2-core machine.
  constexpr double kRankProcessBytes = 64.0 * (1 << 20);
  constexpr double kGiB = 1 << 30;
  if (const auto available = train::available_memory_bytes(); available && nproc * kRankProcessBytes > *available) {
    std::ostringstream os;
    os.precision(3);
    os << "--nproc " << nproc << " local ranks need about " << nproc * kRankProcessBytes / kGiB
       << " GiB for the processes alone (64 MiB each, before any model) but this machine has " << *available / kGiB
       << " GiB available; use at most " << static_cast<int>(*available / kRankProcessBytes)
       << " local ranks, or several machines (torchrun)";
    throw std::invalid_argument(os.str());
  }
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && static_cast<unsigned>(nproc) > 4 * cores)
    std::cerr << "hyperpipe: warning: --nproc " << nproc << " local ranks share " << cores
              << " cores: steps run far slower than with a core per rank (to measure schedules, emulate the devices"
                 " with --emulate-layer-ms)\n";
}

namespace {

// Every node runs the same command but for --node-rank: a flag one node
// lacks (--metrics on node 0 only) would have its ranks call other
// collectives than the rest and hang until the timeout. Refused instead, once,
// as the job starts.
void check_same_command_on_every_node(comm::ProcessGroup& pg) {
  std::string command;
  const std::vector<std::string> args = self_args();
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--node-rank") {
      ++i;
      continue;
    }
    if (args[i].rfind("--node-rank=", 0) == 0) continue;
    command += args[i] + '\0';
  }
  const auto h = static_cast<std::int64_t>(model::fnv1a64(command));
  const at::Tensor all = pg.all_gather(at::tensor({h}, at::kLong)).view(-1);
  const std::int64_t first = all[0].item<std::int64_t>();
  for (int r = 1; r < pg.world_size(); ++r)
    if (all[r].item<std::int64_t>() != first)
      throw std::invalid_argument("launch.nnodes: rank " + std::to_string(r) + " runs another command line than rank 0 " +
                                  "(beyond launch.node_rank): every node must run the same flags");
}

}  // namespace

int run_job(const JobOptions& o, const std::function<void(int world)>& validate,
            const std::function<int(comm::ProcessGroup* pg)>& rank_main) {
  if (!comm::has_environment()) {
    launch::LaunchOptions lo;
    lo.nproc = o.nproc;
    lo.nnodes = o.nnodes;
    lo.node_rank = o.node_rank;
    lo.master_addr = o.master_addr;
    lo.master_port = o.master_port;
    lo.command = self_args();
    lo.max_restarts = o.max_restarts;
    lo.rendezvous_timeout_s = o.rendezvous_timeout_s;
    launch::check_launch_options(lo);  // the node flags before the layout, which they size
    check_local_ranks_fit(o.nproc);
    validate(o.nproc * o.nnodes);
    return launch::launch_local(lo);
  }
  const comm::DistEnv env = comm::DistEnv::from_environment();
  if (o.nproc_given && o.nproc * o.nnodes != env.world_size)
    throw std::invalid_argument("--nproc " + std::to_string(o.nproc) + " x --nnodes " + std::to_string(o.nnodes) +
                                " disagrees with WORLD_SIZE=" + std::to_string(env.world_size));
  validate(env.world_size);
  if (const char* t = std::getenv("OMP_NUM_THREADS")) at::set_num_threads(std::max(1, std::atoi(t)));
  runtime::tensor_memory::retain_freed_pages();
  comm::ProcessGroupOptions pgo;
  pgo.timeout = std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000));
  std::unique_ptr<comm::ProcessGroup> pg;
  if (env.world_size == 1) return rank_main(nullptr);
  pg = std::make_unique<comm::ProcessGroup>(comm::ProcessGroup::create(env, pgo));
  comm::Heartbeat heartbeat(*pg);
  try {
    if (o.nnodes > 1) check_same_command_on_every_node(*pg);
    return rank_main(pg.get());
  } catch (const comm::CommError& e) {
    // A peer's failure: say which rank is gone or stuck and where each was.
    heartbeat.report_failure(e.what());
    const auto store = pg->store_keepalive();
    pg.reset();  // peers waiting on this rank fail now, not at their timeout
    const std::string survey = heartbeat.diagnose();
    // The launcher names the rank to blame, not this one (launch/error_file.hpp).
    if (const char* file = std::getenv(launch::kErrorFileEnv)) {
      launch::ErrorRecord record;
      record.message = e.what();
      if (const auto c = heartbeat.culprit()) record.culprit = c->rank, record.culprit_state = c->state;
      launch::write_error_file(file, record);
    }
    // A store rank 0 hosts goes with it; a store file or a launcher's outlives every rank.
    if (env.rank == 0 && env.rank0_hosts_store()) heartbeat.wait_for_peers(std::chrono::seconds(5));
    throw std::runtime_error(std::string(e.what()) + "\n" + survey);
  } catch (const std::exception& e) {
    heartbeat.report_failure(e.what());
    throw;
  }
}

void print_blas_line(comm::ProcessGroup* pg) {
  if (pg && pg->rank() != 0) return;
  const runtime::BlasLibrary b = runtime::detect_blas();
  const int threads = at::get_num_threads();
  std::cout << runtime::blas_line(b) << ", " << threads << (threads == 1 ? " thread" : " threads") << " per rank"
            << std::endl;
  if (const std::string w = runtime::blas_warning(b); !w.empty()) std::cerr << w << std::endl;
}

int run_job_reporting(const std::string& command, const FlagNames& flags, const JobOptions& o,
                      const std::function<void(int world)>& validate,
                      const std::function<int(comm::ProcessGroup* pg)>& rank_main) {
  const bool as_rank = comm::has_environment();
  try {
    return run_job(o, validate, rank_main);
  } catch (const std::exception& e) {
    std::cerr << "hyperpipe " << command << ": error: " << with_flags(e.what(), flags) << "\n";
    return as_rank ? 1 : 2;
  }
}

}  // namespace hp::cli
