// Starts one of the test worker programs as a local multi-process job
// (short timeouts, one rank per process) and collects every rank's output.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "launch/launcher.hpp"

namespace hp::testing {

// Runs HP_BIN_DIR/worker with args on nproc ranks; returns the prefixed
// output and sets *code to the job's exit status.
inline std::string launch_workers(const std::string& worker, int nproc, const std::vector<std::string>& args,
                                  int* code) {
  launch::LaunchOptions lo;
  lo.nproc = nproc;
  lo.command = {std::string(HP_BIN_DIR) + "/" + worker};
  lo.command.insert(lo.command.end(), args.begin(), args.end());
  lo.extra_env = {{"HP_TIMEOUT_S", "30"}, {"OMP_NUM_THREADS", "1"}};
  lo.job_timeout = std::chrono::seconds(240);
  std::string out;
  std::mutex mu;
  lo.on_output = [&](const launch::LaunchOutput& o) {
    std::lock_guard<std::mutex> lock(mu);
    out += o.formatted() + "\n";
  };
  *code = launch::launch_local(lo);
  return out;
}

// How often `word` occurs in `text`: the workers print one "OK   " line per
// case and rank, so a case that silently did not run shows as a short count.
inline int count_of(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

}  // namespace hp::testing
