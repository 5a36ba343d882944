// Runs a shell command with a time limit and captures its output (stdout and
// stderr together). popen forks the test process: call it from the test's
// thread before any LibTorch work of the test's own starts threads.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include <nlohmann/json.hpp>

namespace hp::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

inline CommandResult run_command(const std::string& command, int timeout_s = 120) {
  CommandResult r;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string full = "timeout -k 5 " + std::to_string(timeout_s) + " " + command + " 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

inline std::string hyperpipe() { return std::string(HP_BIN_DIR) + "/hyperpipe"; }

// A fresh, empty directory under the test temp dir.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "hp_" + name + "_" + std::to_string(::getpid());
  run_command("rm -rf '" + dir + "' && mkdir -p '" + dir + "'");
  return dir;
}

// What a suite's set-up made (a training run's checkpoint) in `dir`, and the
// command's result.
struct SharedRun {
  std::string dir;
  CommandResult result;
};

// `command` (a shell command; every "{DIR}" in it is the directory it
// writes into) run once per build of the hyperpipe binary and shared by
// every test process that asks for the same one: ctest runs each test of a
// suite in a process of its own, so a suite's set-up would otherwise train
// once per test. The first asker runs it under a file lock, the others wait
// for the lock and reuse the directory and the recorded result. A failed run
// is not kept: the next asker runs it again.
inline SharedRun shared_run(const std::string& name, const std::string& command, int timeout_s) {
  struct stat bin {};
  ::stat(hyperpipe().c_str(), &bin);
  const std::size_t key = std::hash<std::string>{}(command + "|" + std::to_string(bin.st_mtime) + "|" +
                                                   std::to_string(bin.st_size));
  const std::string root = std::string(HP_BIN_DIR) + "/../shared-test-runs";
  ::mkdir(root.c_str(), 0755);
  SharedRun r;
  r.dir = root + "/" + name + "-" + std::to_string(key);
  const int lock = ::open((r.dir + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ::flock(lock, LOCK_EX);
  std::ifstream done(r.dir + "/.result");
  if (done >> r.result.exit_code && r.result.exit_code == 0) {
    std::getline(done, r.result.output, '\0');
  } else {
    run_command("rm -rf '" + r.dir + "' && mkdir -p '" + r.dir + "'");
    std::string full = command;
    for (std::size_t at; (at = full.find("{DIR}")) != std::string::npos;) full.replace(at, 5, r.dir);
    r.result = run_command(full, timeout_s);
    if (r.result.exit_code == 0) std::ofstream(r.dir + "/.result") << 0 << r.result.output;
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return r;
}

// The "loss" field of every line of a --metrics file, by step.
// (step, value of `key`) of every line of a --metrics file that has the key.
inline std::vector<std::pair<long, double>> read_losses(const std::string& path, const std::string& key = "loss") {
  std::vector<std::pair<long, double>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains(key)) out.emplace_back(j.at("step").get<long>(), j.at(key).get<double>());
  }
  return out;
}

}  // namespace hp::testing
