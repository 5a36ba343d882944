// Tensor memory accounting: a counting CPU allocator installed over
// LibTorch's own, so a rank can report the live and peak bytes of its CPU
// tensors (parameters, gradients, optimizer state, activations, buffers in
// flight) as a step runs.
//
// Contract: process-wide. install() puts the counter in place once (later
// calls do nothing); tensors allocated before it are neither counted nor
// subtracted when freed. The counters are atomic, so tensors may be freed on
// any thread (a transport thread drops a sent buffer). reset_peak() starts a
// new window whose peak is the bytes live at that moment. Before install()
// every reading is 0.
#pragma once

#include <cstdint>

namespace hp::runtime::tensor_memory {

void install();
bool installed();
std::int64_t live_bytes();
std::int64_t peak_bytes();
void reset_peak();

}  // namespace hp::runtime::tensor_memory
