#include "bench/schedule_bench.hpp"

#include <algorithm>
#include <stdexcept>

#include "bench/calibration.hpp"
#include "bench/mesh_links.hpp"
#include "bench/timing.hpp"
#include "comm/process_group.hpp"
#include "runtime/tensor_memory.hpp"
#include "schedule/generate.hpp"
#include "schedule/schedule_table.hpp"
#include "schedule/simulate.hpp"

namespace hp::bench {
namespace {

namespace memory = runtime::tensor_memory;

// Steps of `p` timed, in ms per step; collective over the job.
double time_steps(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros, int steps, bool sync_grads,
                  comm::ProcessGroup* job, const std::function<void()>& after_step) {
  if (job) job->barrier();
  const auto t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    p.step(micros, sync_grads);
    p.zero_grad();
    after_step();
  }
  if (job) job->barrier();
  return ms_since(t0) / steps;
}

// A rank's tensor-parallel all-reduces in one step, each measured (the
// counters' difference over `steps` steps) beside as simulated (the rank's
// report).
TensorParallelRow tensor_parallel_row(const schedule::CostModel& cm, const schedule::RankReport& simulated,
                                      const comm::CommCounters& before, const comm::CommCounters& after, int steps) {
  TensorParallelRow row;
  row.tp = cm.tp;
  for (const auto& ta : simulated.timeline) {
    if (ta.action.type != schedule::ActionType::FWD && ta.action.type != schedule::ActionType::BWD) continue;
    const schedule::StageCost sc = cm.stage(ta.action.stage);
    const schedule::Collectives& c = ta.action.type == schedule::ActionType::FWD ? sc.tp_f : sc.tp_b;
    row.calls.simulated += c.calls, row.bytes.simulated += c.bytes, row.ms.simulated += cm.tp_time(c);
  }
  const double n = steps;
  row.calls.measured = (after.all_reduces - before.all_reduces) / n;
  row.bytes.measured = (after.all_reduce_bytes - before.all_reduce_bytes) / n;
  row.ms.measured = (after.all_reduce_us - before.all_reduce_us) / 1000 / n;
  row.latency_ms = cm.tp_latency;
  row.bytes_per_ms = cm.tp_bw;
  return row;
}

// The schedule's textbook bubble (its row's: Megatron's, ZB-H1's, DualPipe's)
// from stage 0's costs; none for MPipe, whose transposed preprocess no
// formula counts.
std::optional<double> theory_bubble(const schedule::ScheduleOptions& layout, const schedule::CostModel& cm) {
  const schedule::ScheduleRow& row = schedule::schedule_row(layout.kind);
  if (!row.theory_bubble) return std::nullopt;
  return row.theory_bubble(layout, cm.stage(0));
}

// The busiest rank's forwards and backwards of every micro-batch.
double ideal_step(const schedule::ScheduleOptions& layout, const schedule::CostModel& cm) {
  double ideal = 0;
  for (int r = 0; r < layout.pp; ++r) {
    double busy = 0;
    for (int c = 0; c < layout.vpp; ++c)
      busy += layout.micro_batches * (cm.forward_time(layout.stage_of(r, c)) + cm.backward_time(layout.stage_of(r, c)));
    ideal = std::max(ideal, busy);
  }
  return ideal;
}

}  // namespace

std::string row_label(const std::string& schedule, int vpp) { return schedule + " v" + std::to_string(vpp); }

double BenchRow::bubble_in_step() const {
  const auto busiest = std::max_element(traced.begin(), traced.end(),
                                        [](const StepBreakdown& a, const StepBreakdown& b) { return a.compute < b.compute; });
  return busiest == traced.end() ? 0.0 : busiest->step / busiest->compute - 1;
}

runtime::PipelineOptions row_options(const BenchOptions& o, const std::string& name, int world, const train::Task& task) {
  const int mesh = o.dp * o.tp;
  runtime::PipelineOptions p;
  auto& s = p.schedule;
  s = o.schedule;
  const auto slash = name.find('/');
  const std::string kind = name.substr(0, slash), body = slash == std::string::npos ? "" : name.substr(slash + 1);
  if (!schedule::kind_from_name(kind, &s.kind) ||
      (!body.empty() && (s.kind != schedule::ScheduleKind::MPipe || !schedule::kind_from_name(body, &s.mpipe.body))))
    throw std::invalid_argument("bench.schedules: unknown schedule '" + name +
                                "'; allowed: " + schedule::kind_names() + " (mpipe around interleaved), or mpipe/BODY "
                                "around one of " + schedule::mpipe_body_names() + ", e.g. mpipe/zb1p");
  const schedule::ScheduleRow& row = schedule::schedule_row(s.kind);
  // --vpp applies to the rows (MPipe: the bodies) whose chunks per rank are not fixed.
  const bool chunked =
      !(s.kind == schedule::ScheduleKind::MPipe ? schedule::schedule_row(s.mpipe.body) : row).fixed_vpp();
  if (!row.pipelined && mesh > 1)
    throw std::invalid_argument("bench.schedules no-pipelining runs the model on rank 0 alone: it does not combine with"
                                " mesh.dp or model.tensor_parallel.size; drop it from bench.schedules");
  s.pp = row.pipelined ? world / mesh : 1;  // no-pipelining: rank 0 alone
  s.vpp = chunked && o.vpp_given ? o.schedule.vpp : schedule::default_vpp(s);
  p.executor = o.executor;
  runtime::validate_pipeline_options(p);
  task.validate(p.schedule);
  return p;
}

BenchRow bench_schedule(const BenchOptions& o, const train::Task& task, const std::string& name, const train::Place& at,
                        const std::function<void(const std::string& label)>& on_step) {
  comm::ProcessGroup* const job = at.world;
  const int world = job ? job->world_size() : 1;
  const auto options = row_options(o, name, world, task);
  BenchRow row;
  row.schedule = name;
  row.layout = options.schedule;
  const bool alone = options.schedule.pp == 1 && world > 1 && !at.mesh;
  if (alone && job->rank() != 0) {
    job->barrier();
    return row;
  }
  comm::ProcessGroup* group = alone ? nullptr : at.pp;
  comm::ProcessGroup* const everyone = alone ? nullptr : job;
  const int rank = alone ? 0 : at.stage_rank;
  const int mb = o.schedule.micro_batches;
  const runtime::RankModel model = task.build(options.schedule, rank, at.parallel);
  runtime::Pipeline p(options, rank, group, model, alone ? nullptr : at.average);
  // The layout as the pipeline runs it (a frozen preprocess makes MPipe's frozen).
  const auto& layout = p.options().schedule;
  row.layout = layout;
  // Every rank loads its replica's whole batch: calibration runs any stage on micro-batch 0.
  runtime::Reads all{{}, true, true};
  for (int m = 0; m < mb * at.replicas; ++m) all.input_micros.push_back(m);
  auto global = task.batch(0, mb * at.replicas, all);
  const std::vector<runtime::MicroBatch> micros(global.begin() + at.replica * mb, global.begin() + (at.replica + 1) * mb);
  const std::string label = row.label();
  p.step(micros);  // warm-up
  p.zero_grad();
  memory::reset_peak();
  const comm::CommCounters tp_before = at.tp ? at.tp->counters() : comm::CommCounters{};
  row.measured_ms = time_steps(p, micros, o.steps, true, everyone, [&] {
    if (job == nullptr || job->rank() == 0) on_step(label);
  });
  const comm::CommCounters tp_after = at.tp ? at.tp->counters() : comm::CommCounters{};
  // Data parallelism: the same steps without averaging, as one pipeline alone runs them.
  const double no_sync = at.replicas > 1 ? time_steps(p, micros, o.steps, false, everyone, [] {}) : 0.0;
  const bool mpipe = layout.kind == schedule::ScheduleKind::MPipe;
  if (mpipe) row.mpipe_measured = mpipe_work(p, micros);
  for (const auto& peak : comm::all_gather_rows(group, {static_cast<double>(memory::peak_bytes())}))
    row.peak_bytes.push_back(peak[0]);
  const bool split = schedule::splits_backward(layout.kind);
  const Calibration calibration =
      sum_over(calibrate_rank(model, micros[0], layout.num_stages(), o.calibration_reps, at.tp, split), group);
  p.zero_grad();
  schedule::CostModel cm = cost_model(calibration, split);
  if (model.preprocess && group) price_broadcast(*model.preprocess, *group, cm);
  const double grad_bytes = rank_grad_bytes(cm, layout, rank);
  price_mesh_links(at, layout, o.layer_forward_ms, p.options().grad_bucket_bytes, cm);
  // Every pipeline rank prices the links as its own groups measured them; rank 0's are simulated.
  const auto sim = schedule::simulate(schedule::generate(layout), cm);
  row.simulated_ms = sim.step_time;
  row.simulated_bubble = sim.bubble_fraction;
  row.ideal_ms = ideal_step(layout, cm);
  row.theory_bubble = theory_bubble(layout, cm);
  if (split) row.stage0 = cm.stage(0);
  row.preprocess_f = cm.pre_f, row.preprocess_b = cm.pre_b;
  if (mpipe)
    row.mpipe_simulated = MPipeWork{schedule::time_in(sim, 0, schedule::ActionType::MPIPE_PARAM_BROADCAST),
                                    schedule::time_in(sim, 0, schedule::ActionType::MPIPE_TRANSPOSE_BWD)};
  if (at.tp) row.tensor_parallel = tensor_parallel_row(cm, sim.ranks[rank], tp_before, tp_after, o.steps);
  if (at.replicas > 1) {
    schedule::CostModel alone_cm = cm;
    alone_cm.dp = 1;
    row.data_parallel = DataParallelRow{cm.dp,
                                        {no_sync, schedule::simulate(schedule::generate(layout), alone_cm).step_time},
                                        grad_bytes, cm.dp_latency, cm.dp_bw};
  }
  const StepBreakdown mine = break_down_step(p, micros, group);
  for (const auto& r : comm::all_gather_rows(
           group, {mine.step, mine.compute, mine.wait, mine.post, mine.rest, mine.optimizer, mine.actions}))
    row.traced.push_back({r[0], r[1], r[2], r[3], r[4], r[5], r[6]});
  if (o.profile_ops) row.ops = profile_step_ops(p, micros);
  if (alone) job->barrier();
  row.filled = true;
  return row;
}

}  // namespace hp::bench
