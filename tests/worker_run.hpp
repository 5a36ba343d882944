// A local job of one of the test rank programs (tests/*/*_worker.cpp, built
// into HP_BIN_DIR) started with the launcher: every rank's lines as the
// launcher reported them, and the job's exit status.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launch/launcher.hpp"

namespace hp::testing {

struct WorkerJob {
  std::string program;             // in HP_BIN_DIR
  std::vector<std::string> args;
  int nproc = 2;
  double rank_timeout_s = 20;      // each rank's group timeout (HP_TIMEOUT_S, rank_program.hpp)
  double job_timeout_s = 120;      // the launcher's bound on the whole job
  bool store_file = true;          // false: rank 0 hosts a TCPStore
  bool shared_memory = true;       // false: messages between the ranks go over Gloo
};

struct WorkerRun {
  int code = -1;
  std::vector<launch::LaunchOutput> lines;

  std::string all() const {
    std::string s;
    for (auto& l : lines) s += l.formatted() + "\n";
    return s;
  }
  bool has(const std::string& needle) const { return all().find(needle) != std::string::npos; }
  int count(const std::string& needle) const {
    int c = 0;
    for (auto& l : lines) c += l.formatted().find(needle) != std::string::npos;
    return c;
  }
  // What `rank` printed itself, without the launcher's prefix.
  std::string of(int rank) const {
    std::string s;
    for (auto& l : lines)
      if (l.rank == rank) s += l.text + "\n";
    return s;
  }
};

inline WorkerRun run_workers(const WorkerJob& job) {
  launch::LaunchOptions o;
  o.nproc = job.nproc;
  o.command = {std::string(HP_BIN_DIR) + "/" + job.program};
  o.command.insert(o.command.end(), job.args.begin(), job.args.end());
  o.extra_env = {{"HP_TIMEOUT_S", std::to_string(job.rank_timeout_s)}, {"OMP_NUM_THREADS", "1"}};
  o.store_file = job.store_file;
  o.shared_memory = job.shared_memory;
  o.shutdown_grace = std::chrono::seconds(2);
  o.job_timeout = std::chrono::milliseconds(static_cast<long>(1000 * job.job_timeout_s));
  WorkerRun r;
  o.on_output = [&](const launch::LaunchOutput& l) { r.lines.push_back(l); };
  r.code = launch::launch_local(o);
  return r;
}

// Every rank printed "rank R: <what> ok" and the job passed.
inline void expect_every_rank_ok(const WorkerRun& r, int nproc, const std::string& what) {
  EXPECT_EQ(r.code, 0) << r.all();
  for (int k = 0; k < nproc; ++k) {
    const std::string line = "[rank " + std::to_string(k) + "] rank " + std::to_string(k) + ": " + what + " ok";
    EXPECT_TRUE(r.has(line)) << "missing '" << line << "' in\n" << r.all();
  }
}

}  // namespace hp::testing
