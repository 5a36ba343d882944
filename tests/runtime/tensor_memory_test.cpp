#include "runtime/tensor_memory.hpp"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <vector>

namespace memory = hp::runtime::tensor_memory;

TEST(TensorMemory, CountsLiveAndPeakBytesOfTensors) {
  memory::install();
  ASSERT_TRUE(memory::installed());
  const std::int64_t before = memory::live_bytes();
  memory::reset_peak();
  {
    const at::Tensor a = at::empty({1000}, at::kFloat);
    EXPECT_EQ(memory::live_bytes() - before, 4000);
    {
      const at::Tensor b = at::empty({250}, at::kDouble);
      EXPECT_EQ(memory::live_bytes() - before, 6000);
    }
    EXPECT_EQ(memory::live_bytes() - before, 4000);
  }
  EXPECT_EQ(memory::live_bytes(), before);
  EXPECT_EQ(memory::peak_bytes() - before, 6000);
  memory::reset_peak();
  EXPECT_EQ(memory::peak_bytes(), memory::live_bytes());
}

TEST(TensorMemory, RawAllocationsAreCountedAndAligned) {
  memory::install();
  c10::Allocator* a = c10::GetCPUAllocator();
  const std::int64_t before = memory::live_bytes();
  void* p = a->raw_allocate(100);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(memory::live_bytes() - before, 100);
  a->raw_deallocate(p);
  EXPECT_EQ(memory::live_bytes(), before);
  // Kernels that use raw scratch buffers still run.
  const at::Tensor x = at::randn({64, 4096});
  EXPECT_TRUE(at::gelu(x).allclose(0.5 * x * (1 + at::erf(x / std::sqrt(2.0))), 1e-5, 1e-6));
}

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Page faults taken by a micro-batch's worth of activations: 32 tensors of
// 256 KiB allocated, written and freed.
long faults_of_a_round() {
  const long before = minor_faults();
  {
    std::vector<at::Tensor> held;
    for (int i = 0; i < 32; ++i) held.push_back(at::ones({64 << 10}, at::kFloat));
  }
  return minor_faults() - before;
}

}  // namespace

// With glibc's starting thresholds a round's 8 MiB are mapped and unmapped
// tensor by tensor, so every round faults its 2048 pages in again; retained,
// the next round reuses them. The starting thresholds are pinned first: left
// alone, glibc raises them as memory is freed, by an amount that depends on
// what ran before (928 to 1377 faults a round on two machines).
TEST(TensorMemory, RetainedPagesAreReusedWithoutFaults) {
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  faults_of_a_round();
  const long before = faults_of_a_round();
  hp::runtime::tensor_memory::retain_freed_pages();
  for (int warm = 0; warm < 3; ++warm) faults_of_a_round();  // the heap grows to its working size
  // The fewest of five rounds: a round may also count a fault of something
  // else the process does meanwhile (CI's loaded machine once saw 128).
  long after = faults_of_a_round();
  for (int round = 0; round < 4; ++round) after = std::min(after, faults_of_a_round());
  EXPECT_GT(before, 1900) << "with glibc's starting thresholds a freed round goes back to the kernel";
  EXPECT_LT(after, 100) << "freed pages should be reused without faulting them in again";
}
