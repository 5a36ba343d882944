// Runs a shell command with a time limit and captures its output (stdout and
// stderr together). The test binaries that use it load no LibTorch, so
// popen's fork is safe.
#pragma once

#include <chrono>
#include <cstdio>
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
