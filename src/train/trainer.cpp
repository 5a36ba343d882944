#include "train/trainer.hpp"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "comm/heartbeat.hpp"
#include "comm/mesh.hpp"
#include "comm/process_group.hpp"
#include "model/tensor_parallel.hpp"
#include "train/checkpoint.hpp"
#include "train/distributed_optimizer.hpp"
#include "train/grad_clip.hpp"
#include "train/metrics.hpp"
#include "runtime/tensor_memory.hpp"
#include "train/place.hpp"
#include "train/progress.hpp"

namespace hp::train {
namespace memory = runtime::tensor_memory;
namespace {

LrScheduleOptions lr_options(const TrainOptions& o) {
  LrScheduleOptions lr = o.lr;
  lr.decay_steps = std::max<std::int64_t>(o.steps, std::max<std::int64_t>(1, lr.warmup_steps));
  return lr;
}

void validate_checkpoint_shape(const std::string& load, std::int64_t steps, const Task& task);

// Tensor parallelism: the whole tensors of the split parameters and of their
// optimizer state, for a checkpoint. Collective over the tp group.
void gather_whole(NamedParams& params, AdamWState& state, const runtime::TensorShards& shards, comm::ProcessGroup& tp) {
  auto whole = [&](const at::Tensor& t, const runtime::TensorShard& shard) {
    const at::Tensor all = tp.all_gather(t);
    return runtime::unshard(std::vector<at::Tensor>(all.unbind(0)), shard);
  };
  for (const auto& [name, shard] : shards) {
    auto p = params.find(name);  // MPipe: the preprocess counts on rank 0 only
    if (p == params.end()) continue;
    p->second = whole(p->second, shard);
    if (auto it = state.params.find(name); it != state.params.end()) {
      it->second.exp_avg = whole(it->second.exp_avg, shard);
      it->second.exp_avg_sq = whole(it->second.exp_avg_sq, shard);
    }
  }
}

// The mean loss over the held-out batches' target tokens, forward only. Collective.
double evaluate(runtime::Pipeline& pipeline, const Task& task, int iters, const Place& at) {
  double weighted = 0, tokens = 0;
  for (int i = 0; i < iters; ++i) {
    const runtime::StepResult r = pipeline.evaluate(replica_batch(task, &Task::eval_batch, i, pipeline, at));
    weighted += r.loss * static_cast<double>(r.tokens);
    tokens += static_cast<double>(r.tokens);
  }
  return tokens > 0 ? weighted / tokens : 0.0;
}

}  // namespace

void TrainOptions::validate(const Task& task) const {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  if (grad_accum < 1) fail("train.grad_accum must be >= 1, got " + std::to_string(grad_accum));
  if (dp < 1) fail("train.dp must be >= 1, got " + std::to_string(dp));
  if (steps < 1) fail("train.steps must be >= 1, got " + std::to_string(steps));
  if (clip_grad < 0) fail("train.clip_grad must be >= 0, got " + std::to_string(clip_grad));
  if (save_interval < 0) fail("train.save_interval must be >= 0");
  if (log_interval < 1) fail("train.log_interval must be >= 1, got " + std::to_string(log_interval));
  if (fault.rank >= 0 && fault.kind != "exit" && fault.kind != "hang" && fault.kind != "kill" &&
      fault.kind != "stop" && fault.kind != "nospace")
    fail("train.fault: the kind must be exit, hang, kill, stop or nospace, got " + fault.kind);
  if (save_interval > 0 && save.empty()) fail("train.save_interval needs train.save DIR");
  if (eval_interval < 0) fail("train.eval_interval must be >= 0 (0 = no evaluation), got " + std::to_string(eval_interval));
  if (eval_iters < 1) fail("train.eval_iters must be >= 1, got " + std::to_string(eval_iters));
  if (eval_interval > 0 && !task.has_eval_data())
    fail("train.eval_interval needs held-out data, and this data.data has none of its own: give data.eval_data PATH");
  if (keep.keep_last < 0) fail("train.keep.keep_last must be >= 0 (0 keeps every checkpoint), got " + std::to_string(keep.keep_last));
  if (keep.keep_every < 0) fail("train.keep.keep_every must be >= 0, got " + std::to_string(keep.keep_every));
  if (keep.keep_every > 0 && keep.keep_last == 0) fail("train.keep.keep_every needs train.keep.keep_last N (without it every checkpoint is kept)");
  if ((keep.keep_last > 0) && save.empty()) fail("train.keep.keep_last needs train.save DIR");
  if (save_failures != "stop" && save_failures != "continue")
    fail("train.save_failures must be stop or continue, got " + save_failures);
  // Found now rather than at the first save or the first step.
  if (!save.empty()) check_checkpoint_dir_writable(save);
  if (!metrics.empty()) check_metrics_writable(metrics);
  for (const auto& [path, flag] : {std::pair{trace.chrome, "train.trace.chrome"}, {trace.timeline, "train.trace.timeline"}})
    if (!path.empty()) check_metrics_writable(path, flag);
  if (trace.simulate && trace.timeline.empty()) fail("train.trace.simulate needs train.trace.timeline FILE.svg (it draws the simulated step under the measured one)");
  if (!trace.timeline.empty() && dp * task.tensor_parallel() * task.context_parallel() > 1)
    fail("train.trace.timeline draws one pipeline; with train.dp, model.tensor_parallel.size or model.context_parallel.size use train.trace.chrome, which has every rank");
  adam.validate();
  lr_options(*this).validate();
  runtime::validate_pipeline_options(pipeline);
  task.validate(pipeline.schedule);
  // A model too large for the machine, refused now rather than killed by the kernel later.
  if (auto estimate = task.memory_estimate(pipeline.schedule)) {
    const int sharing = task.context_parallel() * dp;
    if (distributed_optimizer) estimate->optimizer /= sharing;
    const char* local = std::getenv("LOCAL_WORLD_SIZE");  // torchrun's; else every rank is here
    const int ranks = local ? std::atoi(local) : pipeline.schedule.pp * sharing * task.tensor_parallel();
    if (auto available = available_memory_bytes()) check_memory_fits(*estimate, std::max(1, ranks), *available);
  }
  if (!load.empty()) validate_checkpoint_shape(load, steps, task);
}

namespace {

// Every file of the checkpoint is checked (checksums) and its model compared with this run's,
// key by key, naming the keys that differ (a key only one side has differs too, e.g. mHC's
// streams; but older checkpoints lack the keys recorded later). A run that would train no
// step past the checkpoint is refused too.
void validate_checkpoint_shape(const std::string& load, std::int64_t steps, const Task& task) {
  static const std::set<std::string> kRecordedLater = {"seq-len", "mhc-sinkhorn-iterations"};
  const CheckpointInfo info = verify_checkpoint(load);
  if (steps <= info.step)
    throw std::invalid_argument("train.steps " + std::to_string(steps) + " trains nothing after train.load " + load +
                                ", saved at step " + std::to_string(info.step) + ": give train.steps above " +
                                std::to_string(info.step));
  if (info.metadata_json.empty()) return;
  const auto saved = nlohmann::json::parse(info.metadata_json);
  const auto mine = nlohmann::json::parse(task.checkpoint_metadata());
  if (!saved.is_object() || !mine.is_object()) return;
  std::set<std::string> keys;
  for (auto it = saved.begin(); it != saved.end(); ++it) keys.insert(it.key());
  for (auto it = mine.begin(); it != mine.end(); ++it) keys.insert(it.key());
  auto value = [](const nlohmann::json& j, const std::string& k) { return j.contains(k) ? j.at(k).dump() : "(none)"; };
  std::string theirs, ours;
  for (const auto& k : keys) {
    if (kRecordedLater.count(k) && !saved.contains(k)) continue;
    if (saved.contains(k) && mine.contains(k) && saved.at(k) == mine.at(k)) continue;
    theirs += " --" + k + " " + value(saved, k);
    ours += " --" + k + " " + value(mine, k);
  }
  if (!theirs.empty())
    throw std::invalid_argument("train.load " + load + ": " + info.path + "/meta.json was saved for a model with" + theirs +
                                "; this run has" + ours);
}

}  // namespace

TrainResult train(const TrainOptions& o, const Task& task, comm::ProcessGroup* pg) {
  o.validate(task);
  memory::install();  // before the model, so parameters count too
  const Place at = make_place(pg, o.pipeline.schedule.pp, o.dp, task.tensor_parallel(), task.context_parallel());
  const int rank = at.stage_rank;
  runtime::RankModel model = task.build(o.pipeline.schedule, rank, at.parallel);
  const runtime::TensorShards shards = model.tensor_parallel;
  model::TensorParallel sequence_parallel = at.parallel.tensor;
  sequence_parallel.sequence_parallel = model.sequence_parallel;
  const int tp_rank = at.parallel.tensor.rank, tp_size = at.parallel.tensor.size;
  // The model's own step values (MTP losses): one slot each in the counters' all-reduce.
  const std::vector<std::string> model_metric_names = model.metric_names;
  const auto model_metrics = model.metrics;
  runtime::Pipeline pipeline(o.pipeline, rank, at.pp, std::move(model), at.average);
  const auto lr_opts = lr_options(o);

  NamedParams params = pipeline.named_parameters();
  DistributedOptimizer optimizer(params, o.adam, o.distributed_optimizer ? at.average : nullptr);
  std::int64_t first_step = 1;
  if (!o.load.empty()) {
    const LoadedCheckpoint loaded = restore_checkpoint(o.load, params, nullptr, shards, tp_rank, tp_size);
    optimizer.load_state(loaded.optimizer);
    first_step = loaded.step + 1;
  }
  auto sum_over = [](comm::ProcessGroup* g) {
    return [g](double x) {
      if (!g || g->world_size() == 1) return x;
      at::Tensor t = at::full({1}, x, at::kDouble);
      g->all_reduce(t);
      return t.item<double>();
    };
  };
  // Gradients are the same in every replica after the step: a norm over one
  // pipeline (its tp groups' shards, each whole parameter once) is global.
  const auto sum_over_pipeline = sum_over(at.pp);
  const auto sum_over_model = [&](double x) { return sum_over_pipeline(sum_over(at.tp)(x)); };
  const auto dup = pipeline.duplicate_parameter_names();
  std::set<std::string> duplicates(dup.begin(), dup.end());
  if (tp_rank > 0)
    for (const auto& [name, p] : params)
      if (!shards.count(name)) duplicates.insert(name);
  std::unique_ptr<MetricsWriter> metrics;
  if (at.world_rank == 0 && !o.metrics.empty()) {
    // A resumed run rewrites what a longer earlier run wrote past the loaded step.
    if (first_step > 1) keep_metrics_through(o.metrics, first_step - 1);
    metrics = std::make_unique<MetricsWriter>(o.metrics, first_step > 1);
  }

  // False when the job is to stop: a save failed (every rank agrees on that) with
  // --save-failures stop. The rank that failed says why in one line and exits non-zero.
  // The first replica's pipeline writes (the replicas hold the same values),
  // its tp groups' first ranks the whole tensors (Place::writes).
  auto save = [&](std::int64_t step) {
    const bool inject = o.fault.kind == "nospace" && o.fault.rank == at.world_rank && o.fault.step == step;
    if (inject)
      set_checkpoint_write_fault([](const std::string& file, std::size_t offset, std::size_t size) {
        return file.size() > 7 && file.compare(file.size() - 7, 7, ".pt.tmp") == 0 && offset >= size / 2 ? ENOSPC : 0;
      });
    auto agree = [&](bool ok) { return sum_over_pipeline(ok ? 0.0 : 1.0) == 0.0; };
    NamedParams whole = params;
    AdamWState state = optimizer.full_state();
    if (at.tp) gather_whole(whole, state, shards, *at.tp);
    SaveOutcome r;
    if (at.writes())
      r = try_save_checkpoint(o.save, step, rank, o.pipeline.schedule.pp, whole, state, task.checkpoint_metadata(),
                              agree, o.keep);
    if (inject) set_checkpoint_write_fault(nullptr);
    if (at.mesh) r.ok = sum_over(at.world)(r.ok ? 0.0 : 1.0) == 0.0;  // the other ranks learn the outcome
    if (r.ok) return true;
    if (o.save_failures == "continue") {
      if (!r.error.empty())
        std::cerr << "hyperpipe train: warning: " << o.name_options(r.error + "; training on (train.save_failures continue)")
                  << std::endl;
      return true;
    }
    if (!r.error.empty()) throw std::runtime_error(r.error);
    return false;
  };

  // --trace / --timeline: the last pipeline run, measured.
  const bool tracing = !o.trace.chrome.empty() || !o.trace.timeline.empty();
  runtime::ActionTrace trace;
  const double clock_offset = tracing ? clock_offset_us(pg) : 0;
  if (tracing) pipeline.executor().set_trace(&trace);

  TrainResult result;
  result.first_step = first_step;
  result.last_step = o.steps;
  Progress progress(first_step, o.steps, o.log_interval, progress_mode_of_stdout(), std::cout);
  for (std::int64_t step = first_step; step <= o.steps; ++step) {
    if (o.fault.rank == at.world_rank && o.fault.step == step && o.fault.kind != "nospace") {
      std::cerr << "rank " << at.world_rank << ": injected fault (" << o.fault.kind << ") at step " << step << std::endl;
      if (o.fault.kind == "hang")
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      if (o.fault.kind == "kill") std::raise(SIGKILL);
      if (o.fault.kind == "stop") std::raise(SIGSTOP);  // every thread, the heartbeat's too
      std::_Exit(17);
    }
    memory::reset_peak();
    comm::note_step(step);
    const auto t0 = std::chrono::steady_clock::now();
    const comm::CommCounters before = at.pp ? at.pp->counters() : comm::CommCounters{};
    double loss = 0;
    std::int64_t tokens = 0;
    std::uint64_t bytes_broadcast = 0;
    std::int64_t bytes_loaded = 0;
    for (int a = 0; a < o.grad_accum; ++a) {
      const std::int64_t index = (step - 1) * o.grad_accum + a;
      // One average over the replicas per optimizer step, after the last accumulation.
      const auto micros = replica_batch(task, &Task::batch, index, pipeline, at);
      trace.clear();
      bytes_loaded += runtime::bytes_of(micros);
      const auto r = pipeline.step(micros, a == o.grad_accum - 1);
      loss += r.loss / o.grad_accum;
      tokens += r.tokens;
      bytes_broadcast += r.bytes_broadcast;
    }
    // Tied copies first: the reduce writes the total into every copy, which
    // the division then scales once.
    pipeline.reduce_tied_grads();
    model::sum_sequence_parallel_grads(params, shards, sequence_parallel);
    if (o.grad_accum > 1) {
      at::NoGradGuard guard;
      for (auto& [name, p] : params)
        if (p.grad().defined()) p.mutable_grad().div_(o.grad_accum);
    }
    GradClipOptions clip;
    clip.max_norm = o.clip_grad;
    const double norm = clip_grad_norm(params, clip, sum_over_model, duplicates);
    const double lr = lr_at(lr_opts, step - 1);
    optimizer.step(lr);
    pipeline.zero_grad();  // also the MPipe replicas, which the optimizer does not hold
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    result.losses.push_back(loss);
    std::optional<double> val_loss;
    if (o.eval_interval > 0 && (step % o.eval_interval == 0 || step == o.steps)) {
      val_loss = evaluate(pipeline, task, o.eval_iters, at);
      result.eval_losses.emplace_back(step, *val_loss);
    }
    const double tps = tokens / (ms / 1000.0);
    if (at.world_rank == 0) {
      std::ostringstream status;
      status.precision(4);
      status << "loss " << loss;
      if (val_loss) status << "  val loss " << *val_loss;
      status << "  lr " << lr << "  " << ms << " ms/step  " << static_cast<long long>(tps) << " tok/s";
      progress.update(step, status.str(), val_loss.has_value());
    }
    // Pipeline traffic, the optimizer state kept, the model's values (averaged
    // over the replicas), each rank's peak tensor bytes and the data bytes it
    // loaded, gathered in one collective, only for --metrics.
    if (!o.metrics.empty()) {
      const comm::CommCounters after = at.pp ? at.pp->counters() : comm::CommCounters{};
      std::vector<double> mine = model_metrics ? model_metrics() : std::vector<double>();
      mine.resize(model_metric_names.size(), 0.0);
      for (double& v : mine) v /= at.replicas * tp_size * at.parallel.context.size;
      mine.insert(mine.begin(), {static_cast<double>(after.bytes_sent - before.bytes_sent),
                                 static_cast<double>(after.bytes_received - before.bytes_received),
                                 static_cast<double>(optimizer.state_bytes()),
                                 static_cast<double>(memory::peak_bytes()),
                                 static_cast<double>(bytes_loaded)});
      const auto rows = comm::all_gather_rows(pg, mine);
      std::vector<double> sums(mine.size(), 0.0);
      for (const auto& row : rows)
        for (size_t i = 0; i < row.size(); ++i) sums[i] += row[i];
      if (metrics) {
        StepMetrics m;
        m.step = step;
        m.loss = loss;
        m.step_ms = ms;
        m.tokens_per_s = tps;
        m.lr = lr;
        m.grad_norm = norm;
        m.extra["bytes_broadcast"] = static_cast<double>(bytes_broadcast);
        m.extra["bytes_sent"] = sums[0];
        m.extra["bytes_received"] = sums[1];
        m.extra["optimizer_state_bytes"] = sums[2];  // of every rank
        for (const auto& [name, column] : {std::pair{"peak_bytes", 3}, {"bytes_loaded", 4}})
          for (const auto& row : rows) m.per_rank[name].push_back(row[column]);
        for (size_t i = 0; i < model_metric_names.size(); ++i) m.extra[model_metric_names[i]] = sums[5 + i];
        if (val_loss) m.extra["val_loss"] = *val_loss;
        metrics->write(m);
      }
    }
    if (!o.save.empty() && ((o.save_interval > 0 && step % o.save_interval == 0) || step == o.steps) && !save(step)) {
      result.last_step = step;
      break;
    }
  }
  if (tracing) write_measured_trace(trace, clock_offset, pg, pipeline.options().schedule, o.trace);
  return result;
}

}  // namespace hp::train
