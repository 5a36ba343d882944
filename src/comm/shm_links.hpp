// ShmLinks: one group's point-to-point messages with the ranks on this host,
// through shared memory (shm_ring.hpp) instead of Gloo, as NCCL's SHM
// transport does for GPUs of one node. ProcessGroup::isend/irecv route a
// peer here when reaches(peer); everything else stays on Gloo. Internal to
// src/comm.
//
// The wire: per ordered pair of ranks and group, one ring (a file in the
// launcher's HYPERPIPE_SHM_DIR, opened by whichever side comes first)
// carrying records {tag, bytes, payload}. The receiver matches records by
// tag as Gloo does: a record for another tag is set aside until its receive
// is waited, so receives may be waited in any order, and records with the
// same tag keep their order.
//
// Contract:
// - send() and recv() are called from the group's thread. send() copies the
//   payload in at once when it fits; otherwise the channel's thread streams
//   the rest as the receiver frees room, in posting order, and the Work
//   completes when the last byte is in. A receive moves data only inside
//   wait(), on the waiting thread.
// - Failures are the group's CommError (op_error.hpp): a peer whose process
//   is gone fails the operation within about 100 ms ("... failed: the
//   connection was closed by peer ..."); no progress for the group's timeout
//   times it out; a message whose size differs from its receive's fails it.
// - Works hold what they use (the group's state, their channel), so they
//   may outlive the ShmLinks; its destructor stops the channels' threads,
//   failing the sends they had not finished.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "comm/op_error.hpp"
#include "comm/work.hpp"

namespace hp::comm {

struct Shared;

class ShmLinks {
 public:
  static constexpr std::size_t kRingBytes = std::size_t{1} << 20;

  // `group` names the group in the rings' file names (unique per group);
  // the job ranks [first_local, first_local + local_count) share this host.
  ShmLinks(std::string dir, std::string group, int first_local, int local_count, std::size_t ring_bytes = kRingBytes);
  ~ShmLinks();
  ShmLinks(const ShmLinks&) = delete;
  ShmLinks& operator=(const ShmLinks&) = delete;

  // Whether the group's rank `peer` is another rank on this host.
  bool reaches(const Shared& sh, int peer) const;

  // `payload` is contiguous and kept until the send completes.
  Work send(const std::shared_ptr<Shared>& sh, OpInfo info, at::Tensor payload);
  // `buffer` is contiguous; on success `copy_back` (if any) runs and the
  // Work's tensor() is `result`.
  Work recv(const std::shared_ptr<Shared>& sh, OpInfo info, at::Tensor buffer, std::function<void()> copy_back,
            at::Tensor result);

  struct Out;
  struct In;

 private:
  std::string path(const Shared& sh, int src, int dst) const;

  std::string dir_;
  std::string group_;
  int first_local_;
  int local_count_;
  std::size_t ring_bytes_;
  std::mutex mu_;  // the maps
  std::map<int, std::shared_ptr<Out>> out_;
  std::map<int, std::shared_ptr<In>> in_;
};

// The file where the job's group of `global_rank` writes its pid, read by
// its peers to tell a rank that is gone from one that is slow.
std::string shm_pid_path(const std::string& dir, int global_rank);

}  // namespace hp::comm
