// DistEnv: where this process sits in a multi-process job, read from the
// torchrun-compatible environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT). Both `torchrun --no-python ...` and hyperpipe's own local
// launcher (launch/launcher.hpp) set these variables; the local launcher also
// sets HYPERPIPE_STORE_PATH, a file in a directory only its user can read, so
// that a local job's store listens on no network interface at all.
//
// Contract: a plain value type, no LibTorch, no global state. from_environment()
// reads the process environment once; parse() takes any lookup function so that
// callers and tests need not touch the real environment. Every parse error is a
// std::invalid_argument whose message names the variable, the value that was
// found and what would have been valid.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace hp::comm {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  // 0 means "let rank 0's store pick a free port"; only meaningful when
  // world_size == 1 (nobody else needs to find it). parse() rejects 0 otherwise.
  int master_port = 0;
  // Non-empty: the job's store is c10d's FileStore at this path instead of a
  // TCPStore hosted by rank 0 (HYPERPIPE_STORE_PATH; the ranks share a disk).
  std::string store_path;
  // Set: the store at master_addr:master_port is hosted by node 0's launcher
  // (comm/launcher_store.hpp), this start's keys under launcher_store_prefix
  // (HYPERPIPE_LAUNCHER_STORE); rank 0 hosts nothing.
  bool launcher_store = false;
  std::string launcher_store_prefix;
  // Non-empty: messages between this host's ranks, RANK - LOCAL_RANK and the
  // LOCAL_WORLD_SIZE - 1 after it, go through shared memory in this directory
  // (HYPERPIPE_SHM_DIR, set by hyperpipe's launcher; comm/shm_links.hpp).
  std::string shm_dir;
  int local_world_size = 1;

  // Rank 0 hosts the store (a TCPStore): it goes when rank 0 goes.
  bool rank0_hosts_store() const { return store_path.empty() && !launcher_store; }

  // A one-process group on loopback (rank 0 of 1, store on a free port).
  static DistEnv single_process();

  // Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT from the
  // process environment (all five are required), HYPERPIPE_STORE_PATH, HYPERPIPE_LAUNCHER_STORE and
  // HYPERPIPE_SHM_DIR (with LOCAL_WORLD_SIZE). Throws std::invalid_argument,
  // e.g. "RANK=abc is not an integer", "RANK=4 must be in [0, WORLD_SIZE=4)",
  // "MASTER_PORT is not set ...".
  static DistEnv from_environment();

  // Same rules as from_environment(), but variables come from `lookup`
  // (nullopt = not set).
  static DistEnv parse(const std::function<std::optional<std::string>(const std::string&)>& lookup);

  // "rank 1/4 (local 1) master 127.0.0.1:29500", for logs.
  std::string to_string() const;
};

// True when this process looks launched as one rank of a job: RANK or
// WORLD_SIZE is set. (A partial environment then makes from_environment()
// report what is missing instead of silently running as a single process.)
bool has_environment();

}  // namespace hp::comm
