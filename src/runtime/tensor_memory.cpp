#include "runtime/tensor_memory.hpp"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <malloc.h>

#include <atomic>
#include <mutex>

namespace hp::runtime::tensor_memory {
namespace {

std::atomic<std::int64_t> live{0};
std::atomic<std::int64_t> peak{0};
std::atomic<bool> active{false};

// Wraps the allocator that was in place. Each allocation is kHeader bytes
// longer and starts with its size; the tensor gets the bytes after the header,
// so the data pointer is its own context (LibTorch's raw_allocate, used for
// scratch buffers inside kernels, requires that) and the header keeps the
// inner allocator's alignment.
constexpr std::size_t kHeader = 64;
c10::Allocator* base = nullptr;
c10::DeleterFnPtr base_delete = nullptr;

void release(void* data) {
  char* raw = static_cast<char*>(data) - kHeader;
  live -= *reinterpret_cast<std::int64_t*>(raw);
  base_delete(raw);
}

class CountingAllocator final : public c10::Allocator {
 public:
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return count(n); }
  void copy_data(void* dest, const void* src, std::size_t n) const override { default_copy_data(dest, src, n); }
#else
  c10::DataPtr allocate(size_t n) const override { return count(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

 private:
  static c10::DataPtr count(size_t n) {
    char* raw = static_cast<char*>(base->raw_allocate(n + kHeader));
    const auto size = static_cast<std::int64_t>(n);
    *reinterpret_cast<std::int64_t*>(raw) = size;
    const std::int64_t now = live += size;
    std::int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    void* data = raw + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
};

}  // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    base = c10::GetCPUAllocator();
    base_delete = base->raw_deleter();
    if (!base_delete) return;  // an allocator whose pointers are not their own context: not counted
    // Lives as long as the process: tensors may be freed during static destruction.
    static auto* counter = new CountingAllocator();
    c10::SetCPUAllocator(counter, /*priority=*/100);
    active = true;
  });
}

void retain_freed_pages() {
#ifdef M_MMAP_THRESHOLD
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest on 64-bit machines
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  });
#endif
}

bool installed() { return active; }
std::int64_t live_bytes() { return live; }
std::int64_t peak_bytes() { return peak; }
void reset_peak() { peak = live.load(); }

}  // namespace hp::runtime::tensor_memory
