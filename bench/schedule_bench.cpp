// Schedule engine throughput at production scale: PP = 64, v = 4, MB = 1024
// MPipe Transpose (T = 1, "full" overflow), about 1.57 million actions
// (522 240 body messages). Issue 13 part 7's goal: generate + validate +
// simulate under 200 ms. Results and how the machine's page faults weigh in:
// docs/PERFORMANCE.md, "The schedule engine at PP 64". Every run allocates
// its schedule and report afresh, as a caller does: where touching fresh
// memory is slow (about 3 ms per MB on the 2-core VM those numbers come from)
// that is much of the time; GLIBC_TUNABLES=glibc.malloc.trim_threshold=4000000000:
// glibc.malloc.mmap_threshold=4000000000 keeps freed memory in the process
// and shows the engine's own time.
#include <benchmark/benchmark.h>

#include <stdexcept>

#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

ScheduleOptions large_mpipe() {
  ScheduleOptions o;
  o.kind = ScheduleKind::MPipe;
  o.pp = 64;
  o.vpp = 4;
  o.micro_batches = 1024;
  o.mpipe.transpose_layers = 1;
  o.mpipe.overflow = Overflow::Full;
  return o;
}

CostModel costs() {
  CostModel c;
  c.pre_f = 0.5;
  c.pre_b = 0.5;
  c.broadcast_bytes = 1e6;
  c.broadcast_bw = 1e7;
  c.p2p_latency = 0.01;
  return c;
}

size_t actions(const Schedule& s) {
  size_t n = 0;
  for (const auto& r : s.ranks) n += r.size();
  return n;
}

void BM_GenerateValidateSimulate(benchmark::State& state) {
  const ScheduleOptions o = large_mpipe();
  const CostModel c = costs();
  size_t n = 0;
  for (auto _ : state) {
    const Schedule s = generate(o);
    const ValidationResult v = validate(s);
    if (!v.ok()) throw std::runtime_error(v.to_string());
    benchmark::DoNotOptimize(simulate(s, c).step_time);
    n = actions(s);
  }
  state.counters["actions"] = static_cast<double>(n);
}
BENCHMARK(BM_GenerateValidateSimulate)->Unit(benchmark::kMillisecond);

void BM_Generate(benchmark::State& state) {
  const ScheduleOptions o = large_mpipe();
  for (auto _ : state) benchmark::DoNotOptimize(generate(o).ranks.data());
}
BENCHMARK(BM_Generate)->Unit(benchmark::kMillisecond);

void BM_Validate(benchmark::State& state) {
  const Schedule s = generate(large_mpipe());
  for (auto _ : state) {
    const ValidationResult v = validate(s);
    if (!v.ok()) throw std::runtime_error(v.to_string());
  }
  state.counters["actions"] = static_cast<double>(actions(s));
}
BENCHMARK(BM_Validate)->Unit(benchmark::kMillisecond);

void BM_Simulate(benchmark::State& state) {
  const Schedule s = generate(large_mpipe());
  const CostModel c = costs();
  for (auto _ : state) benchmark::DoNotOptimize(simulate(s, c).step_time);
  state.counters["actions"] = static_cast<double>(actions(s));
}
BENCHMARK(BM_Simulate)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hp::schedule

BENCHMARK_MAIN();
