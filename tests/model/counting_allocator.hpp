// A CPU allocator that counts live and peak bytes, installed over LibTorch's
// own for the lifetime of the object (tests that measure activation memory).
// One per test binary at a time: c10 keeps the allocator of the highest
// priority it has seen, so a second install would be ignored.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

namespace hp::testing {

class CountingAllocator : public c10::Allocator {
 public:
  CountingAllocator() : base_(c10::GetCPUAllocator()) { c10::SetCPUAllocator(this, /*priority=*/100); }
  ~CountingAllocator() override { c10::SetCPUAllocator(base_, /*priority=*/101); }

#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return count(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return count(n); }
#endif

  std::int64_t live() const { return counters_->live; }
  std::int64_t peak() const { return counters_->peak; }
  void reset_peak() { counters_->peak = counters_->live.load(); }

 private:
  // Shared with every allocation, so a tensor may outlive the allocator.
  struct Counters {
    std::atomic<std::int64_t> live{0}, peak{0};
  };
  struct Record {
    c10::DataPtr inner;
    std::int64_t size;
    std::shared_ptr<Counters> counters;
  };

  c10::DataPtr count(size_t n) const {
    auto* r = new Record{base_->allocate(n), static_cast<std::int64_t>(n), counters_};
    const std::int64_t now = counters_->live += r->size;
    std::int64_t p = counters_->peak;
    while (now > p && !counters_->peak.compare_exchange_weak(p, now)) {
    }
    void* data = r->inner.get();
    const c10::Device device = r->inner.device();
    return {data, r, &release, device};
  }
  static void release(void* ctx) {
    auto* r = static_cast<Record*>(ctx);
    r->counters->live -= r->size;
    delete r;
  }

  c10::Allocator* base_;
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
};

}  // namespace hp::testing
