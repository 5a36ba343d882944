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

// Keeps freed host memory in the process for the next tensors instead of
// handing it back to the kernel. glibc's defaults unmap every freed block over
// 128 KiB and trim the heap's top, so each micro-batch page-faults its
// activations in again, zeroed by the kernel: a sixth of a mid-size GPT step
// (hidden 256, seq 128) on two cores, against none for the caching allocators
// that PyTorch recommends on CPU. Blocks up to 32 MiB then come from the heap,
// and up to 1 GiB of freed heap stays mapped. Process-wide, idempotent; call
// it before the model is built.
void retain_freed_pages();

}  // namespace hp::runtime::tensor_memory
