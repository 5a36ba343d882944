#include "launch/exec_env.hpp"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

extern char** environ;

namespace hp::launch {

EnvBuilder::EnvBuilder() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) vars_.emplace_back(*e);
}

bool EnvBuilder::has(const std::string& key) const {
  return std::any_of(vars_.begin(), vars_.end(), [&](const std::string& kv) { return is_key(kv, key); });
}

void EnvBuilder::set(const std::string& key, const std::string& value) {
  for (auto& kv : vars_) {
    if (is_key(kv, key)) {
      kv = key + "=" + value;
      return;
    }
  }
  vars_.push_back(key + "=" + value);
}

std::vector<char*> EnvBuilder::envp() {
  std::vector<char*> out;
  for (auto& kv : vars_) out.push_back(kv.data());
  out.push_back(nullptr);
  return out;
}

bool EnvBuilder::is_key(const std::string& kv, const std::string& key) {
  return kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=';
}

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    begin = end + 1;
  }
  return name;  // execve fails with ENOENT, reported as for posix_spawnp
}

int cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace hp::launch
