// MicroBatch, and the split and merge of a batch into micro-batches along the
// batch dimension (dim 0), as torch.distributed.pipelining's _microbatch: a
// batch of B rows becomes n micro-batches whose sizes differ by at most one
// (the first B % n get one more).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace hp::runtime {

// One micro-batch as one rank sees it. A rank fills only what it consumes
// (Pipeline::input_micros, Pipeline::reads_targets): the rank of stage 0 (or,
// under MPipe, the micro's owner) the input, the rank of the last stage the
// target; the other fields may stay undefined.
struct MicroBatch {
  at::Tensor input;   // stage 0's input (token ids, pixels, features, ...)
  at::Tensor target;  // what the loss compares the last stage's output with
  // Data a stage reads from the local batch besides its input, never
  // transported (a VL model's caption tokens on stage 0).
  at::Tensor extra;
};

// Which parts of a step's micro-batches one rank reads (Pipeline::reads()):
// the input of input_micros (stage 0's rank, or under MPipe each micro-batch's
// owner), every target when `targets` (the last stage's rank), every `extra`
// when `extra` (stage 0's rank). A data source fills only these and reads
// nothing else, so a middle rank loads no data at all.
struct Reads {
  std::vector<int> input_micros;
  bool targets = false;
  bool extra = false;
  // The micro-batches the targets and extra data are read of: [first_micro,
  // last_micro), all when last_micro < 0 (a data-parallel replica's own).
  int first_micro = 0;
  int last_micro = -1;
  bool covers(int m) const { return m >= first_micro && (last_micro < 0 || m < last_micro); }
};

// Bytes of the tensors defined in the micro-batches (what a rank loaded).
std::int64_t bytes_of(const std::vector<MicroBatch>& micros);

// Throws std::invalid_argument when n < 1 or n > the batch size ("8
// micro-batches need a batch of at least 8 rows along dim 0, got 4").
std::vector<at::Tensor> split_microbatches(const at::Tensor& batch, int n);
at::Tensor merge_microbatches(const std::vector<at::Tensor>& micros);

}  // namespace hp::runtime
