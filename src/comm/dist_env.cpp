#include "comm/dist_env.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace hp::comm {
namespace {

std::optional<std::string> getenv_opt(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// Strict decimal integer: optional sign, digits, nothing else (surrounding
// blanks are tolerated because shells and YAML files add them).
int parse_int(const std::string& name, const std::string& raw) {
  std::size_t b = raw.find_first_not_of(" \t\r\n");
  std::size_t e = raw.find_last_not_of(" \t\r\n");
  std::string s = b == std::string::npos ? std::string() : raw.substr(b, e - b + 1);
  bool ok = !s.empty();
  std::size_t i = (ok && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) ok = false;
  for (std::size_t k = i; ok && k < s.size(); ++k) ok = s[k] >= '0' && s[k] <= '9';
  if (!ok) throw std::invalid_argument(name + "=" + raw + " is not an integer");
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE || v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(name + "=" + raw + " is out of range");
  }
  return static_cast<int>(v);
}

}  // namespace

DistEnv DistEnv::single_process() { return DistEnv{}; }

DistEnv DistEnv::parse(const std::function<std::optional<std::string>(const std::string&)>& lookup) {
  auto require = [&](const std::string& name) {
    std::optional<std::string> v = lookup(name);
    if (!v) {
      throw std::invalid_argument(
          name + " is not set; RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT must all be set "
                 "(torchrun and `hyperpipe launch` set them)");
    }
    return *v;
  };
  DistEnv env;
  env.world_size = parse_int("WORLD_SIZE", require("WORLD_SIZE"));
  if (env.world_size < 1) {
    throw std::invalid_argument("WORLD_SIZE=" + std::to_string(env.world_size) + " must be at least 1");
  }
  env.rank = parse_int("RANK", require("RANK"));
  if (env.rank < 0 || env.rank >= env.world_size) {
    throw std::invalid_argument("RANK=" + std::to_string(env.rank) + " must be in [0, WORLD_SIZE=" +
                                std::to_string(env.world_size) + ")");
  }
  env.local_rank = parse_int("LOCAL_RANK", require("LOCAL_RANK"));
  if (env.local_rank < 0 || env.local_rank >= env.world_size) {
    throw std::invalid_argument("LOCAL_RANK=" + std::to_string(env.local_rank) + " must be in [0, WORLD_SIZE=" +
                                std::to_string(env.world_size) + ")");
  }
  env.master_addr = require("MASTER_ADDR");
  if (env.master_addr.find_first_not_of(" \t") == std::string::npos) {
    throw std::invalid_argument("MASTER_ADDR is empty; it must name the host of rank 0 (e.g. 127.0.0.1)");
  }
  env.master_port = parse_int("MASTER_PORT", require("MASTER_PORT"));
  if (env.master_port < 0 || env.master_port > 65535) {
    throw std::invalid_argument("MASTER_PORT=" + std::to_string(env.master_port) + " must be in [1, 65535]");
  }
  if (env.master_port == 0 && env.world_size > 1) {
    throw std::invalid_argument("MASTER_PORT=0 lets rank 0 pick a port the other " +
                                std::to_string(env.world_size - 1) +
                                " rank(s) cannot know; it is only valid with WORLD_SIZE=1");
  }
  if (auto path = lookup("HYPERPIPE_STORE_PATH")) {
    if (path->empty() || (*path)[0] != '/') {
      throw std::invalid_argument("HYPERPIPE_STORE_PATH=" + *path +
                                  " must be an absolute file path (the job's store file), or not set");
    }
    env.store_path = *path;
  }
  if (auto prefix = lookup("HYPERPIPE_LAUNCHER_STORE")) {
    if (!env.store_path.empty())
      throw std::invalid_argument("HYPERPIPE_LAUNCHER_STORE and HYPERPIPE_STORE_PATH are both set; a job has one store");
    env.launcher_store = true;
    env.launcher_store_prefix = *prefix;
  }
  if (auto dir = lookup("HYPERPIPE_SHM_DIR")) {
    if (dir->empty() || (*dir)[0] != '/')
      throw std::invalid_argument("HYPERPIPE_SHM_DIR=" + *dir + " must be an absolute directory path, or not set");
    auto local = lookup("LOCAL_WORLD_SIZE");
    if (!local)
      throw std::invalid_argument("HYPERPIPE_SHM_DIR is set but LOCAL_WORLD_SIZE is not: the ranks it serves are "
                                  "RANK - LOCAL_RANK and the LOCAL_WORLD_SIZE - 1 after it");
    env.local_world_size = parse_int("LOCAL_WORLD_SIZE", *local);
    if (env.local_world_size <= env.local_rank || env.rank - env.local_rank + env.local_world_size > env.world_size)
      throw std::invalid_argument("LOCAL_WORLD_SIZE=" + *local + " must exceed LOCAL_RANK=" +
                                  std::to_string(env.local_rank) + " and fit in WORLD_SIZE=" +
                                  std::to_string(env.world_size) + " after RANK - LOCAL_RANK");
    env.shm_dir = *dir;
  }
  return env;
}

DistEnv DistEnv::from_environment() { return parse(getenv_opt); }

std::string DistEnv::to_string() const {
  std::ostringstream os;
  os << "rank " << rank << "/" << world_size << " (local " << local_rank << ") master " << master_addr << ":"
     << master_port;
  if (!store_path.empty()) os << " store " << store_path;
  if (launcher_store) os << " store hosted by node 0's launcher";
  if (!shm_dir.empty()) os << " shared memory " << shm_dir;
  return os.str();
}

bool has_environment() { return std::getenv("RANK") != nullptr || std::getenv("WORLD_SIZE") != nullptr; }

}  // namespace hp::comm
