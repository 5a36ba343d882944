// Work: the handle of one posted communication operation (cf. c10d's Work).
//
// Contract:
// - wait() blocks until the operation has completed, at most the group's
//   timeout counted from the call, and throws CommError on failure or timeout.
//   It is idempotent: after success it returns at once; after a failure every
//   further call rethrows the same CommError.
// - is_completed() never blocks. It is true once wait() has returned (or
//   thrown); for collectives it also becomes true when the background transport
//   thread finishes. Gloo reports a send/recv complete only inside wait(), so
//   do not poll P2P work with it: wait where the data is needed.
// - A send keeps the tensor's storage alive until wait() (the caller may swap the
//   tensor's data, e.g. pseudo-deallocate it, right after posting) but the data
//   must not be modified in place before wait() returns. A receive writes into
//   its tensor; read it only after wait(). tensor() is the received tensor (the
//   destination buffer, or the one allocated by a meta receive), undefined for
//   sends and before a successful wait().
// - Dropping a Work that was never waited abandons it: a send may or may not be
//   delivered, a receive's data is lost. Wait every Work (drain sends before the
//   end of a step).
// - Movable, not copyable. Use a Work from the thread that owns its group, or
//   hand it whole to one other thread that only waits and drops it (SendQueue).
//   A Work keeps the transport alive, so it may outlive its ProcessGroup
//   object; except a meta receive's (P2P::irecv_with_meta), which posts its
//   data's receive in wait() and needs the group until then.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace hp::comm {

namespace detail {
// Implemented inside src/comm only (a Gloo operation, a meta receive, a bundle).
class WorkImpl {
 public:
  virtual ~WorkImpl() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
  virtual at::Tensor tensor() const { return at::Tensor(); }
};
}  // namespace detail

class Work {
 public:
  // An empty handle: already complete, wait() returns at once (e.g. a
  // zero-byte transfer that needs no message).
  Work() = default;
  explicit Work(std::unique_ptr<detail::WorkImpl> impl) : impl_(std::move(impl)) {}
  Work(Work&&) noexcept = default;
  Work& operator=(Work&&) noexcept = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() = default;

  // A handle that is already complete and whose tensor() is `result`.
  static Work ready(at::Tensor result);
  // A handle over several operations: wait() waits them in order (stopping at
  // the first failure), is_completed() is true when all are; tensor() is
  // `result` once all succeeded.
  static Work all_of(std::vector<Work> parts, at::Tensor result = at::Tensor());

  void wait() {
    if (impl_) impl_->wait();
  }
  bool is_completed() { return !impl_ || impl_->is_completed(); }
  // An empty handle: complete when posted (no message, or copied in whole to
  // shared memory), with nothing to wait or keep.
  bool empty() const { return !impl_; }
  at::Tensor tensor() const { return impl_ ? impl_->tensor() : at::Tensor(); }

 private:
  std::unique_ptr<detail::WorkImpl> impl_;
};

// Waits for every handle in order and stops at the first failure, rethrowing
// it at once (the rest are abandoned: after a failed operation the job is
// going down, and waiting on them could add one timeout each).
void wait_all(std::vector<Work>& works);

}  // namespace hp::comm
