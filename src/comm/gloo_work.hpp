// GlooWork: the Work (work.hpp) of one operation a ProcessGroup posted to
// Gloo. It holds what must stay alive until the operation is waited (the
// staging buffers, the caller's tensors, the group's state), turns c10d's
// failures and timeouts into the group's CommError (op_error.hpp), and on
// success runs what completes the operation (a copy back from a staging
// buffer) and counts its bytes. Internal to src/comm.
//
// Contract: as Work's. After a failure the buffers are kept, not released:
// a transport that timed out may still write into them.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "comm/group_state.hpp"
#include "comm/op_error.hpp"
#include "comm/work.hpp"

namespace hp::comm {

// LibTorch version differences are confined to this block.
//  - The work handle is c10d::Work from 1.13 on (c10d::ProcessGroup::Work before).
//  - ProcessGroupGloo derives from c10d::ProcessGroup in 1.x and from c10d::Backend
//    in 2.x; src/comm only names ProcessGroupGloo itself and its nested Options,
//    whose create(timeout), devices and threads exist in both.
#if TORCH_VERSION_MAJOR > 1 || (TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR >= 13)
using C10dWork = c10d::Work;
#else
using C10dWork = c10d::ProcessGroup::Work;
#endif

// One c10d work object plus what must live until it is waited, and what to do
// after it succeeded (copy a staging buffer back, count bytes).
class GlooWork final : public detail::WorkImpl {
 public:
  enum class Count { None, Sent, Received };

  GlooWork(std::shared_ptr<Shared> sh, c10::intrusive_ptr<C10dWork> work, OpInfo info,
           std::vector<at::Tensor> keep_alive, std::function<void()> on_success, at::Tensor result,
           std::uint64_t nbytes, Count count)
      : sh_(std::move(sh)), work_(std::move(work)), info_(std::move(info)), keep_(std::move(keep_alive)),
        on_success_(std::move(on_success)), result_(std::move(result)), nbytes_(nbytes), count_(count) {}

  void wait() override;

  bool is_completed() override { return done_ || (work_ && work_->isCompleted()); }

  at::Tensor tensor() const override { return done_ && !error_ ? result_ : at::Tensor(); }

 private:
  std::shared_ptr<Shared> sh_;
  c10::intrusive_ptr<C10dWork> work_;
  OpInfo info_;
  std::vector<at::Tensor> keep_;
  std::function<void()> on_success_;
  at::Tensor result_;
  std::uint64_t nbytes_;
  Count count_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace hp::comm
