#include "cli/bench_command.hpp"

#include <ATen/ATen.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "cli/bench_advise.hpp"
#include "cli/bench_comm.hpp"
#include "cli/emulate_flags.hpp"
#include "cli/family_options.hpp"
#include "cli/job.hpp"
#include "cli/option_flags.hpp"
#include "cli/spread.hpp"
#include "cli/option_schema.hpp"
#include "comm/process_group.hpp"
#include "family/model_family.hpp"
#include "model/hybrid.hpp"
#include "runtime/microbatch.hpp"
#include "runtime/action_trace.hpp"
#include "runtime/grad_reducer.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/tensor_memory.hpp"
#include "runtime/weight_grad_store.hpp"
#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"
#include "train/adamw.hpp"
#include "train/op_profile.hpp"
#include "train/place.hpp"
#include "train/progress.hpp"
#include "train/lm_data.hpp"
#include "train/task.hpp"

namespace hp::cli {
namespace {

namespace memory = runtime::tensor_memory;

// What bench reads from the command line (option_schema.hpp).
struct BenchArgs {
  CommandValues values;
  JobOptions job;
  schedule::ScheduleOptions schedule;  // every row's --mb, --vpp (chunked rows), MPipe's T and owner backward
  model::TransformerConfig model;      // the GPT, or VL's text body
  model::VisionConfig vision;          // --model vl
  model::HybridConfig hybrid;          // --model hybrid
  train::LmDataOptions data;           // --micro-batch-size, --seq-len
  runtime::ExecutorOptions executor;   // --pseudo-deallocate, as train
  RegisteredFlags flags;

  OptionRoots roots() {
    OptionRoots r;
    r.values = &values;
    r.job = &job;
    r.schedule = &schedule;
    r.model = &model;
    r.vision = &vision;
    r.hybrid = &hybrid;
    r.data = &data;
    r.executor = &executor;
    return r;
  }
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

// A result row's name as bench prints it: "1f1b v1", "mpipe/1f1b v1".
std::string row_label(const std::string& schedule, int vpp) { return schedule + " v" + std::to_string(vpp); }
std::string row_label(const nlohmann::json& row) {
  return row_label(row["schedule"].get<std::string>(), row["vpp"].get<int>());
}

// --model's family builds the Task, as train builds it (family/model_family.hpp).
family::FamilyOptions bench_family_options(const BenchArgs& a) {
  return family_options(a.values, a.model, a.data, a.vision, a.hybrid);
}

std::unique_ptr<train::Task> bench_task(const BenchArgs& a) {
  return family::find_family(a.values.model).make_task(bench_family_options(a));
}

// A --schedules entry: a schedule's name, or "mpipe/BODY" for MPipe around
// another body than the interleaved one ("mpipe").
runtime::PipelineOptions pipeline_options(const BenchArgs& a, const std::string& name, int world,
                                          const train::Task& task) {
  const int mesh = a.values.dp * a.model.tensor_parallel.size;
  runtime::PipelineOptions o;
  auto& s = o.schedule;
  s = a.schedule;  // --mb, and MPipe's T and owner backward (which other schedules ignore)
  const auto slash = name.find('/');
  const std::string kind = name.substr(0, slash), body = slash == std::string::npos ? "" : name.substr(slash + 1);
  if (!schedule::kind_from_name(kind, &s.kind) ||
      (!body.empty() && (s.kind != schedule::ScheduleKind::MPipe || !schedule::kind_from_name(body, &s.mpipe.body))))
    throw std::invalid_argument("--schedules: unknown schedule '" + name +
                                "'; allowed: gpipe, 1f1b, interleaved, no-pipelining, zb1p, zbv, mpipe (around interleaved), "
                                "mpipe/1f1b, mpipe/gpipe");
  if (s.kind == schedule::ScheduleKind::MPipe) {
    s.mpipe.overflow = overflow_from_flag(a.values.overflow);
    if (s.mpipe.overflow == schedule::Overflow::Auto)
      throw std::invalid_argument("--overflow auto is chosen by plan and train; bench takes full or min");
  }
  const bool chunked = s.kind == schedule::ScheduleKind::Interleaved ||
                       (s.kind == schedule::ScheduleKind::MPipe && s.mpipe.body == schedule::ScheduleKind::Interleaved);
  if (s.kind == schedule::ScheduleKind::NoPipelining && mesh > 1)
    throw std::invalid_argument("--schedules no-pipelining runs the model on rank 0 alone: it does not combine with"
                                " --dp or --tp; drop it from --schedules");
  s.pp = s.kind == schedule::ScheduleKind::NoPipelining ? 1 : world / mesh;  // no-pipelining: rank 0 alone
  // A given --vpp applies to the chunked rows; every other row takes its schedule's own.
  const bool vpp_given = a.flags.given("--vpp");
  s.vpp = chunked && vpp_given ? a.schedule.vpp : schedule::default_vpp(s);
  o.executor = a.executor;
  runtime::validate_pipeline_options(o);
  task.validate(o.schedule);
  return o;
}

// One timed pass (a forward or a backward) and the tensor-parallel
// all-reduces made inside it: ms in all, and calls, bytes and ms of those.
struct Pass {
  double ms = 0;
  schedule::Collectives tp;
  double tp_ms = 0;
};

// Times `run`, counting the blocking all-reduces it makes over `tp` (may be null).
Pass timed_pass(comm::ProcessGroup* tp, const std::function<void()>& run) {
  const comm::CommCounters before = tp ? tp->counters() : comm::CommCounters{};
  const auto t0 = Clock::now();
  run();
  Pass p{ms_since(t0), {}, 0};
  if (tp) {
    const comm::CommCounters after = tp->counters();
    p.tp = {static_cast<int>(after.all_reduces - before.all_reduces),
            static_cast<double>(after.all_reduce_bytes - before.all_reduce_bytes)};
    p.tp_ms = (after.all_reduce_us - before.all_reduce_us) / 1000;
  }
  return p;
}

// Forward then backward of what `forward` returns (seeded with ones unless it
// is a loss; none for a frozen preprocess).
// The backward of `root` (a loss, or an output seeded with ones); nothing
// when it has no graph.
void backward_from(const at::Tensor& root) {
  if (!root.requires_grad()) return;
  if (root.dim() == 0)
    torch::autograd::backward({root});
  else
    torch::autograd::backward({root}, {at::ones_like(root)});
}

std::pair<Pass, Pass> time_forward_backward(const std::function<at::Tensor()>& forward, comm::ProcessGroup* tp) {
  at::Tensor root;
  const Pass f = timed_pass(tp, [&] { root = forward(); });
  const Pass b = timed_pass(tp, [&] { backward_from(root); });
  return {f, b};
}

// The same backward split as a zero-bubble schedule runs it: the input part
// inside a deferral scope, then the weight products it deferred.
std::pair<Pass, Pass> time_split_backward(const std::function<at::Tensor()>& forward, comm::ProcessGroup* tp) {
  const at::Tensor root = forward();
  runtime::WeightGradWork work;
  const Pass i = timed_pass(tp, [&] {
    const runtime::DeferWeightGrads scope(&work);
    backward_from(root);
  });
  const Pass w = timed_pass(tp, [&] {
    for (auto& product : work) product();
  });
  return {i, w};
}

// What the simulator needs of each stage, as one row of doubles per rank that
// the pipeline group sums (each stage is measured by its own rank): forward and
// backward compute in ms (the tp all-reduces inside taken out: the simulator
// prices those itself), those all-reduces' calls and bytes, and the stage's
// gradient bytes on this rank, the split backward's input and weight parts
// (BWD_I, BWD_W; timed only for a zero-bubble layout); after the stages, MPipe's preprocess forward, backward and
// gradient bytes (filled by the rank of stage 0).
constexpr int kStageFields = 9;
constexpr int kPreFields = 3;

double grad_bytes(const runtime::NamedTensors& params) {
  double bytes = 0;
  for (const auto& [name, w] : params)
    if (w.requires_grad()) bytes += static_cast<double>(w.nbytes());
  return bytes;
}

// Each of this rank's stages timed on one micro-batch (calibration rows as
// above): the median of `reps` runs after a warm-up run, each time on its own,
// so that a run descheduled by another process is not priced into every
// action of the simulated step. Under MPipe stage 0 starts from the
// preprocess output. Collective over `tp` (its ranks hold the same stages).
std::vector<double> calibrate(const runtime::RankModel& model, const runtime::MicroBatch& micro, int stages, int reps,
                              comm::ProcessGroup* tp, bool split) {
  std::vector<double> row(kStageFields * stages + kPreFields, 0.0);
  double* pre = &row[kStageFields * stages];
  const bool has_stage0 = std::any_of(model.stages.begin(), model.stages.end(), [](const auto& st) { return st.index == 0; });
  if (model.preprocess && has_stage0) {
    std::vector<double> fs, bs;
    for (int r = 0; r < reps + 1; ++r) {
      const auto [f, b] = time_forward_backward([&] { return model.preprocess->forward(micro.input); }, nullptr);
      if (r > 0) fs.push_back(f.ms), bs.push_back(b.ms);
    }
    pre[0] = median(fs), pre[1] = median(bs);
    pre[2] = grad_bytes(model.preprocess->parameters);
  }
  for (const auto& st : model.stages) {
    const bool last = st.index == stages - 1;
    at::Tensor input = micro.input;
    if (st.index == 0 && model.preprocess) {
      at::NoGradGuard no_grad;
      input = model.preprocess->forward(micro.input).requires_grad_(true);
    }
    if (st.index > 0) {
      const runtime::TensorSpec spec = model.output_spec(st.index - 1, 0);
      input = at::randn(spec.shape, at::TensorOptions().dtype(spec.dtype)).requires_grad_(true);
    }
    double* out = &row[kStageFields * st.index];
    const auto forward = [&] {
      at::Tensor y = st.forward(input, micro);
      return last ? model.loss(y, micro.target) : y;
    };
    std::vector<double> fs, bs;
    for (int r = 0; r < reps + 1; ++r) {
      const auto [f, b] = time_forward_backward(forward, tp);
      if (r == 0) continue;  // the first run warms caches and allocators
      fs.push_back(f.ms - f.tp_ms), bs.push_back(b.ms - b.tp_ms);
      out[2] = f.tp.calls, out[3] = f.tp.bytes, out[4] = b.tp.calls, out[5] = b.tp.bytes;
    }
    out[0] = median(fs), out[1] = median(bs);
    out[6] = grad_bytes(st.parameters);
    if (!split) continue;
    std::vector<double> is, ws;
    for (int r = 0; r < reps + 1; ++r) {
      const auto [i, w] = time_split_backward(forward, tp);
      if (r > 0) is.push_back(i.ms - i.tp_ms), ws.push_back(w.ms);
    }
    out[7] = median(is), out[8] = median(ws);
  }
  return row;
}

// The mean time of `reps` runs of `op` (after three untimed, which grow the
// heap), in ms: the mean, not the best or the median, because a step pays
// for its slow collectives too (a peer descheduled now and then; here one
// 25 MiB average in four or five takes 130 ms, not 25). Each run follows
// `after_ms` of sleep: after an emulated layer, as the tensor-parallel
// all-reduces meet one in a step, the peers wake at different times and the
// first to arrive waits.
double mean_ms(int reps, double after_ms, const std::function<void()>& op) {
  constexpr int kWarmUp = 3;
  double total = 0;
  for (int r = 0; r < kWarmUp + reps; ++r) {
    if (after_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(after_ms));
    const auto t0 = Clock::now();
    op();
    if (r >= kWarmUp) total += ms_since(t0);
  }
  return total / reps;
}

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

// One more step, traced, and an AdamW step after a first one: where this rank's time went, in
// ms: {step, compute (waits excluded), waits (for received data inside the
// actions, for the last sends and the reductions after them), posting
// messages, the rest (the runtime between actions), optimizer}.
std::vector<double> overhead_breakdown(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros,
                                       comm::ProcessGroup* pg) {
  runtime::ActionTrace trace;
  train::AdamW optimizer(p.named_parameters());
  // An untimed update first: the first creates the state and moves the
  // gradients into the optimizer's buffer, which later steps do not.
  p.step(micros);
  optimizer.step(1e-4);
  p.zero_grad();
  p.executor().set_trace(&trace);
  if (pg) pg->barrier();
  auto t0 = Clock::now();
  p.step(micros);
  const double step = ms_since(t0);

  p.executor().set_trace(nullptr);
  t0 = Clock::now();
  optimizer.step(1e-4);
  const double opt = ms_since(t0);
  p.zero_grad();
  double compute = 0, wait = 0, post = 0;
  for (const auto& e : trace.events()) {
    // An action's waits are wait events too: its own work is busy_us().
    if (e.category == "wait")
      wait += (e.end_us - e.start_us) / 1000.0;
    else
      (e.category == "post" ? post : compute) += e.busy_us() / 1000.0;
  }
  return {step, compute, wait, post, step - compute - wait - post, opt};
}

// MPipe's own work on this rank in one traced step, in ms: the parameter
// broadcast and the preprocess backward (its recompute included), what makes
// MPipe slower than its body where the bubble it fills is small. Collective.
std::array<double, 2> mpipe_work_ms(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros) {
  runtime::ActionTrace trace;
  p.executor().set_trace(&trace);
  p.step(micros);
  p.executor().set_trace(nullptr);
  p.zero_grad();
  std::array<double, 2> ms{};
  for (const auto& e : trace.events()) {
    if (e.category == "wait") continue;
    if (e.action.type == schedule::ActionType::MPIPE_PARAM_BROADCAST) ms[0] += (e.end_us - e.start_us) / 1000;
    if (e.action.type == schedule::ActionType::MPIPE_TRANSPOSE_BWD) ms[1] += (e.end_us - e.start_us) / 1000;
  }
  return ms;
}

// One step of `p` under LibTorch's profiler, its `top` operators by self
// time printed by every rank in turn. Collective.
void print_op_profile(runtime::Pipeline& p, const std::vector<runtime::MicroBatch>& micros, comm::ProcessGroup* pg,
                      const std::string& schedule, int top) {
  train::OpProfile profile;
  p.step(micros);
  p.zero_grad();
  const auto ops = profile.stop();
  double all_us = 0;
  for (const auto& op : ops) all_us += op.self_us;
  const int rank = pg ? pg->rank() : 0, world = pg ? pg->world_size() : 1;
  for (int r = 0; r < world; ++r) {
    if (r == rank) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(3) << "rank " << rank << ", " << schedule << ": one step's top " << top
         << " operators by self time, of " << all_us / 1000 << " ms in operators\n"
         << std::left << std::setw(40) << "operator" << std::right << std::setw(8) << "calls" << std::setw(11)
         << "self ms" << std::setw(11) << "total ms" << std::setw(9) << "self %" << "\n";
      for (int i = 0; i < std::min<int>(top, static_cast<int>(ops.size())); ++i)
        os << std::left << std::setw(40) << ops[i].name.substr(0, 39) << std::right << std::setw(8) << ops[i].calls
           << std::setw(11) << ops[i].self_us / 1000 << std::setw(11) << ops[i].total_us / 1000 << std::setw(8)
           << std::setprecision(1) << 100 * ops[i].self_us / all_us << std::setprecision(3) << "%\n";
      std::cout << os.str() << std::flush;
    }
    if (pg) pg->barrier();
  }
}

// This rank's share of its stages' gradients, in bytes.
double rank_grad_bytes(const schedule::CostModel& cm, const schedule::ScheduleOptions& layout, int rank) {
  double bytes = 0;
  for (int c = 0; c < layout.vpp; ++c) bytes += cm.stage(layout.stage_of(rank, c)).grad_bytes;
  return bytes;
}

// The mesh's links in `cm`, from timed all-reduces of this rank's groups:
// the tp group's at the mean size of a forward's all-reduces (the
// activations'), and the data-parallel group's at one bucket, as the reducer
// runs a bucket. The data-parallel groups time theirs one at a time, as a
// step's stages average at different times (1F1B's last stage first), where
// all at once they would share the cores. Collective over the job.
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

// A rank's tensor-parallel all-reduces in one step: calls, bytes and ms,
// each measured (the counters' difference over `steps` steps) beside as
// simulated (`simulated`: the rank's report).
nlohmann::json tensor_parallel_json(const schedule::CostModel& cm, const schedule::RankReport& simulated,
                                    const comm::CommCounters& before, const comm::CommCounters& after, int steps) {
  int calls = 0;
  double bytes = 0, ms = 0;
  for (const auto& ta : simulated.timeline) {
    if (ta.action.type != schedule::ActionType::FWD && ta.action.type != schedule::ActionType::BWD) continue;
    const schedule::StageCost sc = cm.stage(ta.action.stage);
    const schedule::Collectives& c = ta.action.type == schedule::ActionType::FWD ? sc.tp_f : sc.tp_b;
    calls += c.calls, bytes += c.bytes, ms += cm.tp_time(c);
  }
  const double n = steps;
  return {{"tp", cm.tp},
          {"calls", {(after.all_reduces - before.all_reduces) / n, calls}},
          {"bytes", {(after.all_reduce_bytes - before.all_reduce_bytes) / n, bytes}},
          {"ms", {(after.all_reduce_us - before.all_reduce_us) / 1000 / n, ms}},
          {"latency_ms", cm.tp_latency},
          {"bytes_per_ms", cm.tp_bw}};
}

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

// Time per step of one --schedules entry, measured and simulated from
// calibrated costs. Collective over the job; "no-pipelining" in a job of
// several ranks is the single-process reference: rank 0 runs the whole model
// alone while the others wait (its row is rank 0's). With --dp or --tp every
// pipeline of the mesh runs (`at`); the rows are the first one's.
nlohmann::json bench_schedule(const BenchArgs& a, const train::Task& task, const std::string& name,
                              const train::Place& at, train::Progress& progress, std::int64_t& timed) {
  comm::ProcessGroup* const job = at.world;
  const int world = job ? job->world_size() : 1;
  const auto options = pipeline_options(a, name, world, task);
  const bool alone = options.schedule.pp == 1 && world > 1 && !at.mesh;
  if (alone && job->rank() != 0) {
    timed += a.values.bench_steps;
    job->barrier();
    return {};
  }
  comm::ProcessGroup* group = alone ? nullptr : at.pp;
  comm::ProcessGroup* const everyone = alone ? nullptr : job;
  const int rank = alone ? 0 : at.stage_rank;
  const runtime::RankModel model = task.build(options.schedule, rank, at.parallel);
  runtime::Pipeline p(options, rank, group, model, alone ? nullptr : at.average);
  // The layout as the pipeline runs it (a frozen preprocess makes MPipe's frozen).
  const auto& layout = p.options().schedule;
  // Every rank loads its replica's whole batch: calibration runs any stage on micro-batch 0.
  runtime::Reads all{{}, true, true};
  for (int m = 0; m < a.schedule.micro_batches * at.replicas; ++m) all.input_micros.push_back(m);
  auto global = task.batch(0, a.schedule.micro_batches * at.replicas, all);
  const std::vector<runtime::MicroBatch> micros(global.begin() + at.replica * a.schedule.micro_batches,
                                                global.begin() + (at.replica + 1) * a.schedule.micro_batches);
  const std::string label = row_label(name, layout.vpp);
  p.step(micros);  // warm-up
  p.zero_grad();
  memory::reset_peak();
  const comm::CommCounters tp_before = at.tp ? at.tp->counters() : comm::CommCounters{};
  const double measured = time_steps(p, micros, a.values.bench_steps, true, everyone, [&] {
    if (job == nullptr || job->rank() == 0) progress.update(++timed, label + " timed");
  });
  const comm::CommCounters tp_after = at.tp ? at.tp->counters() : comm::CommCounters{};
  // Data parallelism: the same steps without averaging, as one pipeline alone runs them.
  const double no_sync = at.replicas > 1 ? time_steps(p, micros, a.values.bench_steps, false, everyone, [] {}) : 0.0;
  const bool mpipe = layout.kind == schedule::ScheduleKind::MPipe;
  const auto mpipe_work = mpipe ? mpipe_work_ms(p, micros) : std::array<double, 2>{};
  std::vector<double> peaks;
  for (const auto& row : comm::all_gather_rows(group, {static_cast<double>(memory::peak_bytes())})) peaks.push_back(row[0]);
  const int stages = layout.num_stages();
  const bool split = schedule::splits_backward(layout.kind);
  at::Tensor t = at::tensor(calibrate(model, micros[0], stages, 5, at.tp, split), at::kDouble);
  p.zero_grad();
  if (group) group->all_reduce(t);
  const auto row = t.accessor<double, 1>();
  schedule::CostModel cm;
  for (int s = 0; s < stages; ++s) {
    schedule::StageCost& c = cm.per_stage[s];
    const int i = kStageFields * s;
    c = schedule::StageCost{row[i], row[i + 1]};
    if (split) c.i = row[i + 7], c.w = row[i + 8];
    c.tp_f = {static_cast<int>(row[i + 2]), row[i + 3]};
    c.tp_b = {static_cast<int>(row[i + 4]), row[i + 5]};
    c.grad_bytes = row[i + 6];
  }
  cm.pre_f = row[kStageFields * stages];
  cm.pre_b = row[kStageFields * stages + 1];
  cm.pre_grad_bytes = row[kStageFields * stages + 2];
  if (model.preprocess && group) {
    // MPIPE_PARAM_BROADCAST's bandwidth, from copies of the preprocess parameters.
    std::vector<at::Tensor> copies;
    for (const auto& [param, w] : model.preprocess->parameters) copies.push_back(w.detach().clone());
    for (const auto& c : copies) cm.broadcast_bytes += static_cast<double>(c.nbytes());
    group->broadcast(copies, 0);
    double best_ms = std::numeric_limits<double>::infinity();  // of three: one alone catches a descheduled rank
    for (int r = 0; r < 3; ++r) {
      group->barrier();
      const auto b0 = Clock::now();
      group->broadcast(copies, 0);
      best_ms = std::min(best_ms, ms_since(b0));
    }
    cm.broadcast_bw = cm.broadcast_bytes / std::max(best_ms, 1e-3);
  }
  const double mine = rank_grad_bytes(cm, layout, rank);
  price_mesh_links(at, layout, a.model.emulate.forward_ms, p.options().grad_bucket_bytes, cm);
  // Every pipeline rank prices the links as its own groups measured them; rank 0's are simulated.
  const auto sim = schedule::simulate(schedule::generate(layout), cm);
  schedule::CostModel alone_cm = cm;
  alone_cm.dp = 1;
  const double sim_no_sync = at.replicas > 1 ? schedule::simulate(schedule::generate(layout), alone_cm).step_time : 0.0;
  // The busiest rank's forwards and backwards of every micro-batch: a step with no bubble.
  double ideal = 0;
  for (int r = 0; r < layout.pp; ++r) {
    double busy = 0;
    for (int c = 0; c < layout.vpp; ++c)
      busy += a.schedule.micro_batches * (cm.forward_time(layout.stage_of(r, c)) + cm.backward_time(layout.stage_of(r, c)));
    ideal = std::max(ideal, busy);
  }
  // Megatron's bubble over the ideal step: (PP-1)/MB, and (PP-1)/(v*MB)
  // interleaved; ZB-H1's (PP-1)(F+B-2W) over MB (F+B), stage 0's costs (at v
  // 1: the zero-bubble paper states none for its interleaved form, nor for
  // ZB-V beyond F = I = W).
  nlohmann::json theory = nullptr;
  if (layout.kind == schedule::ScheduleKind::ZeroBubble1P) {
    const schedule::StageCost c = cm.stage(0);
    if (layout.vpp == 1 && layout.pp > 1)
      theory = (layout.pp - 1) * (c.f + c.b - 2 * c.weight_backward()) / (a.schedule.micro_batches * (c.f + c.b));
  } else if (layout.kind != schedule::ScheduleKind::MPipe && layout.kind != schedule::ScheduleKind::ZeroBubbleV &&
             layout.pp > 1) {
    theory = static_cast<double>(layout.pp - 1) / (layout.vpp * a.schedule.micro_batches);
  }
  const nlohmann::json tensor_parallel =
      at.tp ? tensor_parallel_json(cm, sim.ranks[rank], tp_before, tp_after, a.values.bench_steps) : nlohmann::json(nullptr);
  nlohmann::json data_parallel = nullptr;
  if (at.replicas > 1)
    data_parallel = {{"dp", cm.dp},
                     {"no_sync_ms", {no_sync, sim_no_sync}},
                     {"grad_bytes", mine},
                     {"latency_ms", cm.dp_latency},
                     {"bytes_per_ms", cm.dp_bw}};
  nlohmann::json overhead;
  if (a.values.overhead) overhead = comm::all_gather_rows(group, overhead_breakdown(p, micros, group));
  if (a.values.profile_ops > 0) print_op_profile(p, micros, group, label, a.values.profile_ops);
  if (alone) job->barrier();
  return {{"schedule", name},
          {"pp", layout.pp},
          {"vpp", layout.vpp},
          {"mb", a.schedule.micro_batches},
          {"measured_ms", measured},
          {"simulated_ms", sim.step_time},
          {"simulated_bubble", sim.bubble_fraction},
          {"ideal_ms", ideal},
          {"bubble_over_ideal", measured / ideal - 1},
          {"theory_bubble_over_ideal", theory},
          {"peak_bytes", peaks},
          // Stage 0's calibrated backward, whole and split as a zero-bubble schedule runs it.
          {"stage0_backward_ms", split ? nlohmann::json{{"b", cm.stage(0).b}, {"i", cm.stage(0).i}, {"w", cm.stage(0).w}}
                                       : nlohmann::json(nullptr)},
          {"transpose_layers", layout.transposed_layers()},
          {"preprocess_ms", {cm.pre_f, cm.pre_b}},
          // MPipe: rank 0's parameter broadcast and preprocess backward per step, measured and simulated.
          {"mpipe_rank0_ms",
           mpipe ? nlohmann::json{{"broadcast", {mpipe_work[0], schedule::time_in(sim, 0, schedule::ActionType::MPIPE_PARAM_BROADCAST)}},
                                  {"preprocess_backward",
                                   {mpipe_work[1], schedule::time_in(sim, 0, schedule::ActionType::MPIPE_TRANSPOSE_BWD)}}}
                 : nlohmann::json(nullptr)},
          {"data_parallel", data_parallel},
          {"tensor_parallel", tensor_parallel},
          {"overhead_ms", overhead}};
}

// Data and tensor parallelism's share of each row's step, measured beside
// simulated (bench_schedule's "data_parallel" and "tensor_parallel").
void print_mesh_rows(const nlohmann::json& results) {
  auto pair = [](const nlohmann::json& v, int precision) {
    std::ostringstream os;
    os << std::fixed << std::setprecision(precision) << v[0].get<double>() << " (" << v[1].get<double>() << ")";
    return os.str();
  };
  bool header = false;
  for (const auto& r : results) {
    const auto& d = r["data_parallel"];
    if (d.is_null()) continue;
    if (!header)
      std::cout << "data parallelism (dp " << d["dp"].get<int>() << ", one replica's step), ms measured (simulated):"
                << " without averaging, with, the averaging's cost, and each replica's share of a lone pipeline's"
                << " throughput\n";
    header = true;
    const double m = r["measured_ms"], s = r["simulated_ms"];
    const double m0 = d["no_sync_ms"][0], s0 = d["no_sync_ms"][1];
    std::cout << std::left << std::setw(16) << row_label(r) << std::right << std::setw(20) << pair(d["no_sync_ms"], 2)
              << std::setw(20) << pair(nlohmann::json{m, s}, 2) << std::setw(18) << pair(nlohmann::json{m - m0, s - s0}, 2)
              << std::setw(20) << pair(nlohmann::json{100 * m0 / m, 100 * s0 / s}, 1) << " %   ("
              << std::setprecision(2) << d["grad_bytes"].get<double>() / (1 << 20) << " MiB of gradients a rank)\n";
  }
  header = false;
  for (const auto& r : results) {
    const auto& t = r["tensor_parallel"];
    if (t.is_null()) continue;
    if (!header)
      std::cout << "tensor parallelism (tp " << t["tp"].get<int>() << "): rank 0's all-reduces in one step, measured"
                << " (simulated): calls, MiB, ms\n";
    header = true;
    const nlohmann::json mib{t["bytes"][0].get<double>() / (1 << 20), t["bytes"][1].get<double>() / (1 << 20)};
    std::cout << std::left << std::setw(16) << row_label(r) << std::right << std::setw(16) << pair(t["calls"], 0)
              << std::setw(20) << pair(mib, 3) << std::setw(20) << pair(t["ms"], 2) << "\n";
  }
}

int bench_rank(const BenchArgs& a, comm::ProcessGroup* pg) {
  memory::install();
  const int rank = pg ? pg->rank() : 0;
  const int world = pg ? pg->world_size() : 1, tp = a.model.tensor_parallel.size, pp = world / (a.values.dp * tp);
  const train::Place at = train::make_place(pg, pp, a.values.dp, tp, 1);
  nlohmann::json results = nlohmann::json::array();
  const auto schedules = split(a.values.schedules);
  // One unit per timed step, a line per schedule when not on a terminal.
  train::Progress progress(1, static_cast<std::int64_t>(schedules.size()) * a.values.bench_steps, a.values.bench_steps,
                           train::progress_mode_of_stdout(), std::cout);
  std::int64_t timed = 0;
  const auto task = bench_task(a);
  for (const auto& name : schedules) results.push_back(bench_schedule(a, *task, name, at, progress, timed));
  const std::vector<CommBenchRow> comm_rows = a.values.comm ? bench_comm(*pg, a.values.comm_rounds) : std::vector<CommBenchRow>{};
  if (rank != 0) return 0;
  const double m0 = results[0]["measured_ms"], s0 = results[0]["simulated_ms"];
  std::cout << std::left << std::setw(16) << "schedule" << std::right << std::setw(13) << "measured ms"
            << std::setw(14) << "simulated ms" << std::setw(12) << "meas/sim" << std::setw(16) << "meas vs first"
            << std::setw(15) << "sim vs first" << std::setw(17) << "bubble (theory)" << "  peak MiB by rank\n";
  for (auto& r : results) {
    const double m = r["measured_ms"], s = r["simulated_ms"];
    r["measured_over_simulated"] = m / s;
    std::cout << std::left << std::setw(16) << row_label(r)
              << std::right << std::fixed << std::setprecision(2) << std::setw(13) << m << std::setw(14) << s
              << std::setw(12) << m / s << std::setw(16) << m / m0 << std::setw(15) << s / s0;
    // The measured step beyond the busiest rank's compute, over that compute.
    std::ostringstream bubble;
    bubble << std::fixed << std::setprecision(1) << 100 * r["bubble_over_ideal"].get<double>() << "%";
    if (!r["theory_bubble_over_ideal"].is_null())
      bubble << " (" << 100 * r["theory_bubble_over_ideal"].get<double>() << "%)";
    std::cout << std::setw(17) << bubble.str() << "  ";
    std::ostringstream peaks;
    peaks << std::fixed << std::setprecision(2);
    for (const auto& b : r["peak_bytes"]) peaks << (peaks.tellp() > 0 ? "/" : "") << b.get<double>() / (1 << 20);
    std::cout << peaks.str() << "\n";
  }
  if (results.size() > 1) {
    // Whether the simulator, given the calibrated costs, picks the schedule that measured fastest.
    auto fastest = [&](const char* key) {
      const auto it = std::min_element(results.begin(), results.end(), [&](const auto& x, const auto& y) {
        return x[key].template get<double>() < y[key].template get<double>();
      });
      return row_label(*it);
    };
    const std::string measured = fastest("measured_ms"), simulated = fastest("simulated_ms");
    std::cout << "fastest: measured " << measured << ", simulated " << simulated
              << (measured == simulated ? " (the simulator picks the measured winner)" : " (they differ)") << "\n";
  }
  for (const auto& r : results)
    if (!r["stage0_backward_ms"].is_null()) {
      // Whether the split recomputes anything: I + W against the whole backward.
      const auto& c = r["stage0_backward_ms"];
      const double b = c["b"], i = c["i"], w = c["w"];
      std::cout << std::fixed << std::setprecision(2) << "split backward (stage 0, calibrated): I " << i << " + W " << w
                << " = " << i + w << " ms against B " << b << " ms (" << (i + w) / b << " of B)\n";
      break;
    }
  bool mpipe_header = false;
  for (const auto& r : results) {
    if (r["mpipe_rank0_ms"].is_null()) continue;
    if (!mpipe_header)
      std::cout << "MPipe's own work on rank 0 per step, ms measured (simulated): parameter broadcast, preprocess"
                   " backward (recompute included)\n";
    mpipe_header = true;
    const auto& w = r["mpipe_rank0_ms"];
    std::cout << std::left << std::setw(16) << row_label(r)
              << std::right << std::setprecision(2) << std::setw(10) << w["broadcast"][0].get<double>() << " ("
              << w["broadcast"][1].get<double>() << ")" << std::setw(10) << w["preprocess_backward"][0].get<double>()
              << " (" << w["preprocess_backward"][1].get<double>() << ")\n";
  }
  print_mesh_rows(results);
  // The advisor's pick among the measured layouts, on the emulated layer costs.
  std::vector<MeasuredLayout> layouts;
  for (std::size_t i = 0; i < schedules.size(); ++i) {
    const auto layout = pipeline_options(a, schedules[i], world, *task).schedule;
    if (layout.pp == world && world > 1)
      layouts.push_back({row_label(results[i]), layout, results[i]["measured_ms"].get<double>()});
  }
  std::string why_not = at.mesh ? "it lays out one pipeline; --dp and --tp are not in its model" : "";
  const auto advisor = at.mesh ? std::nullopt
                               : check_advisor(family::find_family(a.values.model).profile(bench_family_options(a)),
                                               a.model.emulate, a.values.layers_per_stage.empty(), world,
                                               a.schedule.micro_batches, layouts, &why_not);
  nlohmann::json advisor_json = nullptr;
  if (advisor) {
    std::cout << format_advisor_check(*advisor);
    advisor_json = {{"first_choice", advisor->first_choice},
                    {"first_predicted_ms", advisor->first_predicted},
                    {"first_measured", advisor->first_measured},
                    {"first_measured_rank", advisor->first_measured_rank},
                    {"measured_fastest", advisor->measured_fastest},
                    {"agrees", advisor->agrees()}};
  } else {
    std::cout << "advisor: not asked: " << why_not << "\n";
  }
  if (a.values.overhead) {
    std::cout << "\nwhere one step went, ms (compute without waits | waits: for received data, the last sends, the"
                 " reductions | posting messages | the rest: the runtime between actions | an AdamW step)\n";
    for (const auto& r : results) {
      std::cout << row_label(r) << "\n";
      std::cout << std::right << std::setw(8) << "rank" << std::setw(10) << "step" << std::setw(10) << "compute"
                << std::setw(10) << "wait" << std::setw(10) << "post" << std::setw(10) << "rest" << std::setw(11)
                << "optimizer" << std::setw(9) << "rest %" << "\n";
      int rank_index = 0;
      for (const auto& row : r["overhead_ms"]) {
        std::cout << std::setw(8) << rank_index++;
        for (int i = 0; i < 6; ++i) std::cout << std::setw(i == 5 ? 11 : 10) << row[i].get<double>();
        std::cout << std::setw(8) << 100.0 * row[4].get<double>() / row[0].get<double>() << "%\n";
      }
    }
  }
  nlohmann::json comm = nlohmann::json::array();
  auto spread_json = [](const Spread& s) { return nlohmann::json{{"median", s.median}, {"low", s.low}, {"high", s.high}}; };
  for (const auto& r : comm_rows)
    comm.push_back({{"op", r.op}, {"bytes", r.bytes}, {"hyperpipe_us", r.hyperpipe_us}, {"c10d_us", r.c10d_us},
                    {"ratio", spread_json(r.ratio)}, {"control", spread_json(r.control)}});
  if (!comm_rows.empty()) std::cout << format_comm_rows(comm_rows, a.values.comm_rounds) << std::flush;
  const nlohmann::json mesh{{"pp", pp}, {"dp", a.values.dp}, {"tp", tp}};
  if (!a.values.json.empty())
    std::ofstream(a.values.json) << nlohmann::json{{"mesh", mesh}, {"schedules", results}, {"advisor", advisor_json}, {"comm", comm}}.dump(2)
                          << "\n";
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Step time of schedules side by side, measured and simulated");
  a->flags = add_schema_options(cmd, kBench, a->roots());
  cmd->callback([a, exit_code] {
    a->job.nproc_given = a->flags.given("--nproc");
    a->model.emulate = emulate_from_flag(a->values.emulate_layer_ms, a->model.emulate);
    *exit_code = run_job_reporting(
        "bench", schema_flags(kBench), a->job,
        [a](int world) {
          if (a->values.bench_steps < 1)
            throw std::invalid_argument("--steps must be >= 1, got " + std::to_string(a->values.bench_steps));
          if (split(a->values.schedules).empty())
            throw std::invalid_argument("--schedules names no schedule; give one or more, comma-separated (e.g. "
                                        "1f1b,zb1p,zbv)");
          const int tp = a->model.tensor_parallel.size;
          if (a->values.dp < 1 || tp < 1)
            throw std::invalid_argument("--dp and --tp must be >= 1, got " + std::to_string(a->values.dp) + " and " +
                                        std::to_string(tp));
          if (world % (a->values.dp * tp) != 0)
            throw std::invalid_argument("--tp " + std::to_string(tp) + " x --dp " + std::to_string(a->values.dp) +
                                        " does not divide the job's " + std::to_string(world) +
                                        " ranks (--nproc): the ranks are tp x dp x pp");
          if (a->values.comm && world < 2)
            throw std::invalid_argument("--comm times messages between ranks: give --nproc 2 or more");
          const auto task = bench_task(*a);
          for (const auto& name : split(a->values.schedules)) pipeline_options(*a, name, world, *task);
        },
        [a](comm::ProcessGroup* pg) { return bench_rank(*a, pg); });
  });
}

}  // namespace hp::cli
