// Megatron's mHC recompute groups (--recompute-modules mhc,
// --mhc-recompute-layer-num N): every layer's hyper-connections take part;
// every N consecutive layers of a chunk (or of an MTP depth) form a group (0:
// one group for the whole chunk, Megatron's None). Within a group each
// hyper-connection's aggregation a = H_pre x and merge x' = H_res x +
// H_post F(a) run without a graph and are recomputed in backward (their
// inputs kept), and their outputs' storage is released when the group ends,
// except the merge output of the group's last layer, its boundary. When the
// boundary's gradient arrives, a hook recomputes the group's released outputs
// in forward order into their own storage, so everything that saved them
// (the sublayer's graph, the next mappings) reads them again. The mappings
// (H_pre, H_post, H_res) keep their graph, Sinkhorn's iterations recomputed
// from its input alone, as Megatron's custom function does.
//
// Contract: one MhcRecomputeScope per forward of a chunk or an MTP depth, on
// the thread that runs it (a thread-local current group); grad mode on (with
// it off, or no scope, nothing is released). The released outputs must be
// read by nothing but backward before the boundary's gradient arrives.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

namespace hp::model {

class MhcRecomputeGroup;

// The layers of one forward: opened by the chunk (or MTP depth) around its
// layer loop; each layer reports its output, and every N-th (and the last)
// closes the group with that output as its boundary.
class MhcRecomputeScope {
 public:
  // layers_per_group: N (0: one group); active: recompute on for these layers.
  MhcRecomputeScope(int layers_per_group, bool active);
  ~MhcRecomputeScope();
  MhcRecomputeScope(const MhcRecomputeScope&) = delete;
  MhcRecomputeScope& operator=(const MhcRecomputeScope&) = delete;
  // After each layer: its output; `last` closes the group whatever N says.
  void layer_done(const at::Tensor& output, bool last);

 private:
  int layers_per_group_;
  int in_group_ = 0;
  std::shared_ptr<MhcRecomputeGroup> group_;
  MhcRecomputeGroup* previous_;
};

// For a hyper-connection: the current group, or null (no scope, grad off).
MhcRecomputeGroup* current_mhc_recompute_group();

class MhcRecomputeGroup {
 public:
  // An output whose storage is released when the group ends and refilled by
  // `recompute` (run without grad) when the boundary's gradient arrives.
  void release_later(const at::Tensor& output, std::function<at::Tensor()> recompute);
  // Releases every output given but `boundary` and hooks the refill on it.
  void close(const at::Tensor& boundary);
  std::size_t released_bytes() const { return released_bytes_; }

 private:
  struct Entry {
    at::Tensor output;  // until the group closes; then only its storage
    c10::Storage storage;
    std::function<at::Tensor()> recompute;
    std::size_t bytes = 0;
  };
  std::vector<Entry> entries_;
  std::size_t released_bytes_ = 0;
};

}  // namespace hp::model
