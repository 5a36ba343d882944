// C10dBaseline: a plain c10d ProcessGroupGloo over the job's store, used the
// way a torch.distributed program uses it (post, then wait) with none of
// hyperpipe's layer (checks, staging, labels, counters, deadline waits): the
// baseline `hyperpipe bench --comm` measures src/comm against.
//
// Contract: created by every rank of the job's group, in the same order as
// any other group (it rendezvous under its own store prefix, `name`: two
// baselines of one job need two names); blocking calls
// with c10d's semantics (same byte size on both sides of a send/recv);
// contiguous CPU tensors only. One thread. Lives no longer than `group`.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "comm/process_group.hpp"

namespace hp::comm {

class C10dBaseline {
 public:
  explicit C10dBaseline(const ProcessGroup& group, const std::string& name = "c10d-baseline");
  ~C10dBaseline();
  C10dBaseline(const C10dBaseline&) = delete;
  C10dBaseline& operator=(const C10dBaseline&) = delete;

  void send(const at::Tensor& tensor, int dst, int tag);
  void recv(const at::Tensor& tensor, int src, int tag);
  void broadcast(const at::Tensor& tensor, int root);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hp::comm
