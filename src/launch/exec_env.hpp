// What a rank's execve gets, prepared in the launcher before it forks: the
// environment (this process's, with the launcher's variables set) and the
// program's path. It must all exist before fork because the child of a
// process that may hold locks can only call async-signal-safe functions
// until it execs: no allocation, no getenv, no PATH search.
//
// Contract: plain values; use them on the launcher's thread. envp() points
// into the EnvBuilder, which must outlive the exec that uses it.
#pragma once

#include <string>
#include <vector>

namespace hp::launch {

// This process's environment, with variables set or replaced.
class EnvBuilder {
 public:
  EnvBuilder();  // a copy of environ
  bool has(const std::string& key) const;
  void set(const std::string& key, const std::string& value);
  // "KEY=value" pointers, null-terminated, for execve.
  std::vector<char*> envp();

 private:
  static bool is_key(const std::string& kv, const std::string& key);
  std::vector<std::string> vars_;
};

// command[0] as execvp would find it (through PATH when it has no '/'), resolved before fork.
std::string find_program(const std::string& name);

// The cores this process may run on (its affinity mask, else the online ones),
// at least 1: what the ranks share when OMP_NUM_THREADS is not given.
int cpu_count();

}  // namespace hp::launch
