#include "bench/mesh_links.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <tuple>

#include "bench/timing.hpp"
#include "comm/process_group.hpp"
#include "runtime/grad_reducer.hpp"

namespace hp::bench {
namespace {

// A float tensor of about `bytes`.
at::Tensor floats_of(double bytes) {
  return at::zeros({std::max<std::int64_t>(1, static_cast<std::int64_t>(bytes / 4))}, at::kFloat);
}

// A ring all-reduce's latency and bandwidth over `g` (bytes per ms): the
// latency from a 4-byte all-reduce, the bandwidth from `big_ms`, the time of
// `bytes` as the step moves them. Collective over g.
std::pair<double, double> ring_link(comm::ProcessGroup& g, double bytes, int reps, double after_ms,
                                    const std::function<double()>& big_ms) {
  const at::Tensor one = floats_of(4);
  const double latency = mean_ms(reps, after_ms, [&] { g.all_reduce(one); });
  const int n = g.world_size();
  return {latency, 2.0 * (n - 1) / n * bytes / std::max(big_ms() - latency, 1e-3)};
}

// The tensor-parallel link, from all-reduces of `bytes` after `after_ms` of
// sleep each. Collective over g.
std::pair<double, double> tp_link(comm::ProcessGroup& g, double bytes, double after_ms) {
  constexpr int kReps = 25;
  bytes = std::max(bytes, 4096.0);
  const at::Tensor t = floats_of(bytes);
  return ring_link(g, bytes, kReps, after_ms, [&] { return mean_ms(kReps, after_ms, [&] { g.all_reduce(t); }); });
}

// The data-parallel link, from a GradReducer averaging one bucket of `bytes`
// of gradients as a step's reducer does (copied into one flat tensor,
// all-reduced, divided and copied back). Collective over g.
std::pair<double, double> dp_link(comm::ProcessGroup& g, double bytes) {
  constexpr int kReps = 15;
  bytes = std::max(bytes, 4096.0);
  const at::Tensor w = floats_of(bytes).requires_grad_(true);
  w.mutable_grad() = at::zeros_like(w);
  runtime::GradReducer reducer({{0, {{"bucket", w}}}}, &g, static_cast<std::int64_t>(bytes) + 4);
  return ring_link(g, bytes, kReps, 0, [&] { return mean_ms(kReps, 0, [&] { reducer.finish(); }); });
}

}  // namespace

double rank_grad_bytes(const schedule::CostModel& cm, const schedule::ScheduleOptions& layout, int rank) {
  double bytes = 0;
  for (int c = 0; c < layout.vpp; ++c) bytes += cm.stage(layout.stage_of(rank, c)).grad_bytes;
  return bytes;
}

void price_mesh_links(const train::Place& at, const schedule::ScheduleOptions& layout, double layer_forward_ms,
                      std::int64_t bucket_bytes, schedule::CostModel& cm) {
  const int rank = at.stage_rank, tp = at.parallel.tensor.size;
  if (at.tp) {
    const schedule::StageCost c = cm.stage(rank);
    cm.tp = tp;
    std::tie(cm.tp_latency, cm.tp_bw) = tp_link(*at.tp, c.tp_f.calls ? c.tp_f.bytes / c.tp_f.calls : 0, layer_forward_ms / tp);
  }
  if (!at.average) return;
  cm.dp = at.average->world_size();
  cm.bucket_bytes = static_cast<double>(bucket_bytes);
  const double bucket = std::min(rank_grad_bytes(cm, layout, rank), cm.bucket_bytes);
  for (int g = 0; g < layout.pp * tp; ++g) {
    if (g == rank * tp + at.parallel.tensor.rank)
      std::tie(cm.dp_latency, cm.dp_bw) = dp_link(*at.average, bucket);
    at.world->barrier();
  }
}

void price_broadcast(const runtime::Preprocess& preprocess, comm::ProcessGroup& group, schedule::CostModel& cm) {
  std::vector<at::Tensor> copies;
  for (const auto& [param, w] : preprocess.parameters) copies.push_back(w.detach().clone());
  for (const auto& c : copies) cm.broadcast_bytes += static_cast<double>(c.nbytes());
  group.broadcast(copies, 0);
  double best_ms = std::numeric_limits<double>::infinity();
  for (int r = 0; r < 3; ++r) {
    group.barrier();
    const auto b0 = Clock::now();
    group.broadcast(copies, 0);
    best_ms = std::min(best_ms, ms_since(b0));
  }
  cm.broadcast_bw = cm.broadcast_bytes / std::max(best_ms, 1e-3);
}

}  // namespace hp::bench
