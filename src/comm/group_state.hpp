// The state of one ProcessGroup (the job's or a subgroup) that its
// outstanding Work objects share with it: each GlooWork holds a shared_ptr to
// it, so a Work may outlive the ProcessGroup object without dangling and
// still name the group in its error and count its bytes. Internal to
// src/comm: process_group.cpp makes it, gloo_work.cpp and op_error.cpp read it.
//
// Contract: set up once while the group is formed, then read-only, except
// the counters, which are atomics because a Work may be waited on by another
// thread (SendQueue) while the group's thread reads them.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/dist_env.hpp"

namespace hp::comm {

class ShmLinks;

struct Shared {
  DistEnv env;  // a subgroup's: rank and world_size within the group
  // Global rank of each member (what messages name); empty for the job's group.
  std::vector<int> members;
  std::string name;  // a subgroup's name, for messages
  std::shared_ptr<::gloo::transport::Device> device;  // shared by the job's subgroups
  int gloo_threads = 2;
  std::chrono::milliseconds timeout{};
  int store_port = 0;
  c10::intrusive_ptr<c10d::Store> store;  // keeps rank 0's server alive
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  std::shared_ptr<ShmLinks> shm;  // messages with this host's ranks; null: all on Gloo
  std::atomic<std::uint64_t> bytes_sent{0};
  std::atomic<std::uint64_t> bytes_received{0};
  std::atomic<std::uint64_t> messages_sent{0};
  std::atomic<std::uint64_t> messages_received{0};
  std::atomic<std::uint64_t> all_reduces{0};
  std::atomic<std::uint64_t> all_reduce_bytes{0};
  std::atomic<std::uint64_t> all_reduce_ns{0};
};

// The job-wide rank of the group's member `rank` (negative ranks pass through: "no peer").
inline int global_of(const Shared& sh, int rank) {
  return sh.members.empty() || rank < 0 ? rank : sh.members.at(static_cast<size_t>(rank));
}

}  // namespace hp::comm
