// The built-in local launcher: starts the ranks of a one-host job, like
// `torchrun --standalone --nproc-per-node N --no-python CMD...`.
//
// No LibTorch here. The launcher forks and execs at once, and the child only
// calls async-signal-safe functions (setpgid, prctl, dup2, sigaction,
// execve), so forking is safe beside the one thread it may have: node 0's
// store (store_server.hpp), which runs with every signal blocked.
//
// Contract of launch_local():
// - Starts opts.nproc copies of opts.command (argv; command[0] is searched in
//   PATH) with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
//   MASTER_PORT set, OMP_NUM_THREADS = max(1, cores / nproc) unless already set
//   (in the environment or in extra_env), then opts.extra_env. With
//   opts.store_file, HYPERPIPE_STORE_PATH names a file in a new directory
//   under TMPDIR that only this user can enter (0700), removed when the ranks
//   are gone: hyperpipe ranks keep their store there (c10d's FileStore), so
//   a local job's store is reachable from no network interface. stdin is
//   /dev/null; each rank runs in its own process group and gets SIGKILL when
//   the launcher dies (PR_SET_PDEATHSIG), so a kill -9 of the launcher leaves
//   no rank behind.
// - Every line a rank writes to stdout/stderr reaches opts.on_output (default:
//   the same stream of this process, prefixed "[rank R] ", through a Console,
//   launch/console.hpp), line by line, in the order each rank wrote them. With
//   the default output on a terminal, the ranks get HYPERPIPE_PROGRESS=relay
//   and their progress bars are drawn in place.
// - When a rank exits non-zero or is killed by a signal, one line
//   "hyperpipe launch: rank R failed with exit code C; stopping the other ranks"
//   (or "... with signal S (NAME) ...") goes to on_output (as the launcher's
//   stderr), the other ranks' process groups get SIGTERM, then SIGKILL after
//   opts.shutdown_grace; launch_local returns that rank's status (C, or
//   128 + S for a signal). When every rank exits 0 it returns 0.
// - SIGINT/SIGTERM received while it runs are forwarded to the ranks (SIGKILL
//   after the grace period) and the result is 128 + that signal; one received
//   while it is still starting ranks starts no more. The previous
//   signal dispositions are restored before returning.
// - opts.job_timeout > 0 bounds each start of the group: past it the ranks are stopped
//   the same way and the result is 124.
// - A rank that cannot be started (no such program) ends the launch with 127.
// - opts.max_restarts > 0 (torchrun's --max-restarts): when a rank fails as
//   above, once every rank is gone the whole group starts again, up to
//   max_restarts times, after one line "hyperpipe launch: restart N of K
//   after rank R failed with ...: starting every rank again". A restarted
//   group gets HYPERPIPE_RESTART_COUNT=N (torchrun's TORCHELASTIC_RESTART_
//   COUNT too), HYPERPIPE_RESTART_REASON (that rank's failure, as the line says
//   it) and HYPERPIPE_FAILED_AT_MS (when the failure was seen, ms since the
//   epoch), a fresh port and a fresh store; the first start gets count 0. No
//   restart follows the launcher's own SIGINT/SIGTERM, the job timeout, a rank
//   that cannot be started, or a rank exiting with kExitNoRestart (a failure a
//   restart would meet again, e.g. a full disk). When the restarts are spent
//   the last failure's status is the result, after "hyperpipe launch: giving
//   up after K restarts".
// - Several hosts (torchrun's --nnodes --node-rank --nproc-per-node
//   --master-addr --master-port): with opts.nnodes > 1 this launcher starts
//   node opts.node_rank's opts.nproc ranks, global ranks node_rank x nproc ..
//   + nproc - 1 of WORLD_SIZE nnodes x nproc (GROUP_RANK = node_rank), all
//   with the same MASTER_ADDR and MASTER_PORT (which must be given). Node 0's
//   launcher hosts the job's store there, bound to that address alone
//   (store_server.hpp); no rank hosts one and no store file is made: the
//   ranks get HYPERPIPE_LAUNCHER_STORE, their start's key prefix. Output lines
//   carry the global rank. The launchers meet on that store (node_group.hpp)
//   and decide each start together: every node's launcher waits for the
//   others at each start (up to opts.rendezvous_timeout_s), the first failure
//   any node records is the start's, and every other node stops its ranks
//   within 100 ms of it, with one line naming it ("rank 3 failed with ...",
//   "node 1's launcher was lost ..."). The restarts follow as on one node,
//   counted once for the job; a launcher killed with -9 takes its ranks with
//   it (PR_SET_PDEATHSIG) and fails the start, and when it is started again
//   within the rendezvous timeout it joins the next start; if it does not,
//   the others end with one line naming its node. The launcher's own
//   SIGINT/SIGTERM, the job timeout and kExitNoRestart end every node's job.
//   A node whose ranks all exited 0 waits for the others' end (a failure
//   there restarts it too); node 0 keeps the store up until the others have
//   left (at most 5 s). Losing node 0's launcher ends the job on every node.
// - Blocking; call from one thread at a time (signal handling is process-wide).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hp::launch {

struct LaunchOutput {
  int rank = -1;           // -1: a message of the launcher itself
  bool is_stderr = false;
  std::string text;        // the line, without newline and prefix
  // "[rank R] text" for a rank's line, text for the launcher's own.
  std::string formatted() const;
};

struct LaunchOptions {
  int nproc = 1;       // ranks on this node (torchrun's --nproc-per-node)
  int nnodes = 1;      // nodes, each with its own launcher
  int node_rank = 0;   // this launcher's node, in [0, nnodes)
  std::vector<std::string> command;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free port
  std::chrono::milliseconds shutdown_grace = std::chrono::seconds(3);
  std::chrono::milliseconds job_timeout = std::chrono::milliseconds(0);  // 0: unbounded
  std::vector<std::pair<std::string, std::string>> extra_env;
  std::function<void(const LaunchOutput&)> on_output;  // empty: print prefixed lines
  bool forward_signals = true;
  // Give the ranks a private store file (HYPERPIPE_STORE_PATH).
  bool store_file = true;
  // Messages between this node's ranks go through shared memory, a private
  // directory under /dev/shm (HYPERPIPE_SHM_DIR, comm/shm_links.hpp), not
  // Gloo; HYPERPIPE_SHM=0 in the launcher's environment also turns it off.
  bool shared_memory = true;
  int max_restarts = 0;  // restarts of the whole group after a rank fails
  // Several nodes: how long a launcher waits for the others at each start
  // (a launcher killed with -9 may be started again meanwhile) and at the end.
  double rendezvous_timeout_s = 600;
};

// The variables a restarted group's ranks read (the contract above).
inline constexpr const char* kRestartCountEnv = "HYPERPIPE_RESTART_COUNT";
inline constexpr const char* kRestartReasonEnv = "HYPERPIPE_RESTART_REASON";
inline constexpr const char* kFailedAtMsEnv = "HYPERPIPE_FAILED_AT_MS";

// The exit code with which a rank asks the launcher not to restart the job:
// its failure would happen again (hyperpipe train's failed save).
inline constexpr int kExitNoRestart = 79;

// Throws std::invalid_argument for bad options (nproc < 1, empty command,
// port out of range, node_rank outside [0, nnodes), several nodes without a
// port, max_restarts < 0), naming them as launch.<field>.
void check_launch_options(const LaunchOptions& opts);

// check_launch_options, then the launch.
int launch_local(const LaunchOptions& opts);

// A TCP port that was free a moment ago on `addr` (bind to port 0, read it,
// close). Throws std::runtime_error when no socket can be bound.
int pick_free_port(const std::string& addr = "127.0.0.1");

}  // namespace hp::launch
