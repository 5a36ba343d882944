// OpProfile: where a region's CPU time went, by LibTorch operator (aten::mm,
// AddmmBackward0, ...), read from LibTorch's own profiler (the one
// torch.profiler runs, CPU activities only; it needs no libkineto).
//
// Contract: one OpProfile at a time per process (the profiler is process
// state); it records the ops of the thread that made it and of the threads
// that inherit its state (autograd's), from construction to stop(). Self time
// is an op's time minus that of the ops it called; nested calls of one
// operator each count. c10d's gloo:send and gloo:recv ranges run from the
// post to the completion, so the ops run meanwhile count as their children
// and their self time is time spent waiting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hp::train {

struct OpTime {
  std::string name;
  std::int64_t calls = 0;
  double self_us = 0;
  double total_us = 0;
};

class OpProfile {
 public:
  OpProfile();  // starts recording
  ~OpProfile();  // stops, if stop() was not called
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Stops recording; every operator seen, most self time first.
  std::vector<OpTime> stop();

 private:
  bool on_ = false;
};

}  // namespace hp::train
