#include "train/trainer.hpp"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "comm/heartbeat.hpp"
#include "comm/mesh.hpp"
#include "comm/process_group.hpp"
#include "model/tensor_parallel.hpp"
#include "train/checkpoint.hpp"
#include "train/weights_file.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/distributed_optimizer.hpp"
#include "train/grad_clip.hpp"
#include "train/metrics.hpp"
#include "runtime/executor.hpp"
#include "runtime/tensor_memory.hpp"
#include "train/place.hpp"
#include "train/progress.hpp"
#include "train/step_counters.hpp"

namespace hp::train {
namespace memory = runtime::tensor_memory;
namespace {

LrScheduleOptions lr_options(const TrainOptions& o) {
  LrScheduleOptions lr = o.lr;
  lr.decay_steps = std::max<std::int64_t>(o.steps, std::max<std::int64_t>(1, lr.warmup_steps));
  return lr;
}

void validate_checkpoint(const std::string& load, std::int64_t steps, bool must_train_past, const Task& task);

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
double evaluate(runtime::Pipeline& pipeline, const Task& task, int iters, const Place& place) {
  double weighted = 0, tokens = 0;
  for (int i = 0; i < iters; ++i) {
    const runtime::StepResult r = pipeline.evaluate(replica_batch(task, &Task::eval_batch, i, pipeline, place));
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
  if (fault.rank >= 0 && !is_fault_kind(fault.kind))
    fail("train.fault: the kind must be " + fault_kind_names(", ") + ", got " + fault.kind);
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
  // A restarted job whose last start saved its last step has nothing left to train, and ends.
  if (!load.empty()) validate_checkpoint(load, steps, /*must_train_past=*/restart.count == 0, task);
  if (!init_from.empty() && !load.empty() && restart.count == 0)
    fail("train.init_from " + init_from + " and train.load " + load +
         " both say where the run starts: give one (init_from begins a new run from weights, load resumes a run)");
  if (!init_from.empty()) check_weights_file(init_from);
}

namespace {

// Every file of the checkpoint is checked (checksums) and its model compared with this run's,
// key by key, naming the keys that differ (a key only one side has differs too, e.g. mHC's
// streams; but older checkpoints lack the keys recorded later). A run that would train no
// step past the checkpoint is refused too, unless !must_train_past.
void validate_checkpoint(const std::string& load, std::int64_t steps, bool must_train_past, const Task& task) {
  static const std::set<std::string> kRecordedLater = {"seq-len", "mhc-sinkhorn-iterations"};
  const CheckpointInfo info = verify_checkpoint(load);
  if (must_train_past && steps <= info.step)
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

namespace {

// What one step did, as the loop reports it.
struct StepOutcome {
  std::int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0, ms = 0;
  std::int64_t tokens = 0;
  std::optional<double> val_loss;
  std::uint64_t bytes_broadcast = 0;
  RankStepCounters counters;
  double tokens_per_s() const { return tokens / (ms / 1000.0); }
};

// One rank's part of a training job: its pipeline, the optimizer over its
// parameters, and the groups its sums run over. Built collectively, used
// from the rank's thread.
class Trainer {
 public:
  Trainer(const TrainOptions& o, const Task& task, comm::ProcessGroup* pg)
      : o_(o),
        task_(task),
        pg_(pg),
        place_(make_place(pg, o.pipeline.schedule.pp, o.dp, task.tensor_parallel(), task.context_parallel())),
        pipeline_(build_pipeline()),
        params_(pipeline_.named_parameters()),
        optimizer_(params_, o.adam, o.distributed_optimizer ? place_.average : nullptr),
        lr_(lr_options(o)) {
    if (!o.load.empty()) {
      const LoadedCheckpoint loaded =
          restore_checkpoint(o.load, params_, nullptr, shards_, place_.parallel.tensor.rank, place_.parallel.tensor.size);
      optimizer_.load_state(loaded.optimizer);
      first_step_ = loaded.step + 1;
    } else if (!o.init_from.empty()) {
      init_from_weights(o.init_from, params_, shards_, place_.parallel.tensor.rank, place_.parallel.tensor.size);
    }
    // A save an earlier run did not finish (killed half-way) is removed before this run writes
    // one; rank 0 finishes this before any step, so before any rank's first shard.
    if (!o.save.empty() && place_.world_rank == 0)
      for (const auto& name : remove_stale_dirs(o.save))
        std::cout << "hyperpipe train: removed " << (std::filesystem::path(o.save) / name).string()
                  << ", left by an interrupted save" << std::endl;
    // A whole parameter a tp rank holds beside rank 0 counts once in the norm.
    for (const auto& name : pipeline_.duplicate_parameter_names()) duplicates_.insert(name);
    if (place_.parallel.tensor.rank > 0)
      for (const auto& [name, p] : params_)
        if (!shards_.count(name)) duplicates_.insert(name);
    if (place_.world_rank == 0 && !o.metrics.empty()) {
      // A resumed run rewrites what a longer earlier run wrote past the loaded step.
      if (first_step_ > 1) keep_metrics_through(o.metrics, first_step_ - 1);
      metrics_ = std::make_unique<MetricsWriter>(o.metrics, first_step_ > 1);
    }
    if (tracing()) {
      clock_offset_us_ = clock_offset_us(pg);
      pipeline_.executor().set_trace(&trace_);
    }
  }

  std::int64_t first_step() const { return first_step_; }

  // After a restart: rank 0 says what failed, where the run resumed and how
  // long after the failure its first step starts (the recovery time).
  void announce_restart() {
    if (o_.restart.count == 0) return;
    if (o_.restart.failed_at_ms > 0) {
      const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch());
      recovery_s_ = (now.count() - o_.restart.failed_at_ms) / 1000.0;
    }
    if (place_.world_rank != 0) return;
    std::ostringstream line;
    line.precision(3);
    line << "hyperpipe train: restart " << o_.restart.count << " after " << o_.restart.reason << ": ";
    if (first_step_ > o_.steps)
      line << "the checkpoint of step " << first_step_ - 1 << " holds the last step; nothing is left to train";
    else if (first_step_ > 1)
      line << "resumed from the checkpoint of step " << first_step_ - 1;
    else
      line << "no checkpoint yet, started again from step 1";
    if (recovery_s_ >= 0 && first_step_ <= o_.steps)
      line << "; its first step starts " << recovery_s_ << " s after the failure";
    std::cout << line.str() << std::endl;
  }
  int world_rank() const { return place_.world_rank; }

  // Forward and backward of grad_accum batches, the gradients reduced and
  // clipped, one optimizer step; then the evaluation when one is due.
  StepOutcome step(std::int64_t step) {
    memory::reset_peak();
    comm::note_step(step);
    StepOutcome out;
    out.step = step;
    const auto t0 = std::chrono::steady_clock::now();
    const comm::CommCounters before = place_.pp ? place_.pp->counters() : comm::CommCounters{};
    for (int a = 0; a < o_.grad_accum; ++a) {
      const std::int64_t index = (step - 1) * o_.grad_accum + a;
      const auto micros = replica_batch(task_, &Task::batch, index, pipeline_, place_);
      trace_.clear();  // the trace keeps the last pipeline run
      out.counters.bytes_loaded += static_cast<double>(runtime::bytes_of(micros));
      // One average over the replicas per optimizer step, after the last accumulation.
      const auto r = pipeline_.step(micros, a == o_.grad_accum - 1);
      out.loss += r.loss / o_.grad_accum;
      out.tokens += r.tokens;
      out.bytes_broadcast += r.bytes_broadcast;
    }
    average_grads();
    GradClipOptions clip;
    clip.max_norm = o_.clip_grad;
    out.grad_norm = clip_grad_norm(params_, clip, [&](double x) { return sum_over(place_.pp, sum_over(place_.tp, x)); },
                                   duplicates_);
    out.lr = lr_at(lr_, step - 1);
    optimizer_.step(out.lr);
    pipeline_.zero_grad();  // also the MPipe replicas, which the optimizer does not hold
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (o_.eval_interval > 0 && (step % o_.eval_interval == 0 || step == o_.steps))
      out.val_loss = evaluate(pipeline_, task_, o_.eval_iters, place_);
    const comm::CommCounters after = place_.pp ? place_.pp->counters() : comm::CommCounters{};
    RankStepCounters& c = out.counters;
    c.bytes_sent = static_cast<double>(after.bytes_sent - before.bytes_sent);
    c.bytes_received = static_cast<double>(after.bytes_received - before.bytes_received);
    c.optimizer_state_bytes = static_cast<double>(optimizer_.state_bytes());
    c.peak_bytes = static_cast<double>(memory::peak_bytes());
    if (model_metrics_) c.model_values = model_metrics_();
    // Each replica, tp and cp rank computes the model's values: its share.
    for (double& v : c.model_values) v /= place_.replicas * place_.parallel.tensor.size * place_.parallel.context.size;
    return out;
  }

  // The progress line on rank 0 and, with --metrics, one line of every
  // rank's counters (collective).
  void report(const StepOutcome& s, Progress& progress) {
    if (place_.world_rank == 0) {
      std::ostringstream status;
      status.precision(4);
      status << "loss " << s.loss;
      if (s.val_loss) status << "  val loss " << *s.val_loss;
      status << "  lr " << s.lr << "  " << s.ms << " ms/step  " << static_cast<long long>(s.tokens_per_s()) << " tok/s";
      progress.update(s.step, status.str(), s.val_loss.has_value());
    }
    if (o_.metrics.empty()) return;
    StepMetrics m;
    m.step = s.step;
    m.loss = s.loss;
    m.step_ms = s.ms;
    m.tokens_per_s = s.tokens_per_s();
    m.lr = s.lr;
    m.grad_norm = s.grad_norm;
    m.extra["bytes_broadcast"] = static_cast<double>(s.bytes_broadcast);
    gather_step_counters(s.counters, model_metric_names_, pg_, m);
    if (s.val_loss) m.extra["val_loss"] = *s.val_loss;
    if (o_.restart.count > 0 && s.step == first_step_) {
      m.extra["restart"] = o_.restart.count;
      m.extra["resumed_from_step"] = static_cast<double>(first_step_ - 1);
      if (recovery_s_ >= 0) m.extra["recovery_s"] = recovery_s_;
      m.text["restart_reason"] = o_.restart.reason;
    }
    if (metrics_) metrics_->write(m);
  }

  bool save_due(std::int64_t step) const {
    return !o_.save.empty() && ((o_.save_interval > 0 && step % o_.save_interval == 0) || step == o_.steps);
  }

  // A checkpoint of `step`: the first replica's pipeline writes (the replicas
  // hold the same values), its tp groups' first ranks the whole tensors
  // (Place::writes). False when the job is to stop: a save failed (every
  // rank agrees on that) with train.save_failures stop; the rank that
  // failed throws its one line.
  bool save(std::int64_t step) {
    const SaveFaultScope fault(o_.fault, place_.world_rank, step, o_.restart.count);
    auto agree = [&](bool ok) { return sum_over(place_.pp, ok ? 0.0 : 1.0) == 0.0; };
    NamedParams whole = params_;
    AdamWState state = optimizer_.full_state();
    if (place_.tp) gather_whole(whole, state, shards_, *place_.tp);
    SaveOutcome r;
    if (place_.writes())
      r = try_save_checkpoint(o_.save, step, place_.stage_rank, o_.pipeline.schedule.pp, whole, state,
                              task_.checkpoint_metadata(), agree, o_.keep);
    if (place_.mesh) r.ok = sum_over(place_.world, r.ok ? 0.0 : 1.0) == 0.0;  // the other ranks learn the outcome
    if (r.ok) return true;
    if (o_.save_failures == "continue") {
      if (!r.error.empty())
        std::cerr << "hyperpipe train: warning: "
                  << o_.name_options(r.error + "; training on (train.save_failures continue)") << std::endl;
      return true;
    }
    if (!r.error.empty()) throw SaveFailed(r.error);
    return false;
  }

  // --trace / --timeline: the last pipeline run, measured.
  void finish() {
    if (tracing()) write_measured_trace(trace_, clock_offset_us_, pg_, pipeline_.options().schedule, o_.trace);
  }

 private:
  // The rank's model as a pipeline; keeps what the loop needs of the model
  // beyond its stages (shards, sequence parallelism, the model's values).
  runtime::Pipeline build_pipeline() {
    runtime::RankModel model = task_.build(o_.pipeline.schedule, place_.stage_rank, place_.parallel);
    shards_ = model.tensor_parallel;
    sequence_parallel_ = place_.parallel.tensor;
    sequence_parallel_.sequence_parallel = model.sequence_parallel;
    model_metric_names_ = model.metric_names;
    model_metrics_ = model.metrics;
    return runtime::Pipeline(o_.pipeline, place_.stage_rank, place_.pp, std::move(model), place_.average);
  }

  // Tied copies first: the reduce writes the total into every copy, which
  // the division by the accumulated runs then scales once.
  void average_grads() {
    pipeline_.reduce_tied_grads();
    model::sum_sequence_parallel_grads(params_, shards_, sequence_parallel_);
    if (o_.grad_accum == 1) return;
    at::NoGradGuard guard;
    for (auto& [name, p] : params_)
      if (p.grad().defined()) p.mutable_grad().div_(o_.grad_accum);
  }

  // x summed over g (null or one rank: x).
  static double sum_over(comm::ProcessGroup* g, double x) {
    if (!g || g->world_size() == 1) return x;
    at::Tensor t = at::full({1}, x, at::kDouble);
    g->all_reduce(t);
    return t.item<double>();
  }

  bool tracing() const { return !o_.trace.chrome.empty() || !o_.trace.timeline.empty(); }

  const TrainOptions& o_;
  const Task& task_;
  comm::ProcessGroup* pg_;
  const Place place_;
  runtime::TensorShards shards_;
  model::TensorParallel sequence_parallel_;
  std::vector<std::string> model_metric_names_;
  std::function<std::vector<double>()> model_metrics_;
  runtime::Pipeline pipeline_;
  NamedParams params_;
  DistributedOptimizer optimizer_;
  const LrScheduleOptions lr_;
  std::int64_t first_step_ = 1;
  // Gradients are the same in every replica after the step: a norm over one
  // pipeline (its tp groups' shards, each whole parameter once) is global.
  std::set<std::string> duplicates_;
  std::unique_ptr<MetricsWriter> metrics_;
  runtime::ActionTrace trace_;
  double clock_offset_us_ = 0;
  double recovery_s_ = -1;  // after a restart: from the failure to the first step; < 0 unknown
};

}  // namespace

TrainResult train(const TrainOptions& o, const Task& task, comm::ProcessGroup* pg) {
  o.validate(task);
  memory::install();  // before the model, so parameters count too
  Trainer trainer(o, task, pg);
  TrainResult result;
  result.first_step = trainer.first_step();
  result.last_step = o.steps;
  trainer.announce_restart();
  Progress progress(result.first_step, o.steps, o.log_interval, progress_mode_of_stdout(), std::cout);
  for (std::int64_t step = result.first_step; step <= o.steps; ++step) {
    inject_step_fault(o.fault, trainer.world_rank(), step, o.restart.count);
    const StepOutcome s = trainer.step(step);
    result.losses.push_back(s.loss);
    if (s.val_loss) result.eval_losses.emplace_back(step, *s.val_loss);
    trainer.report(s, progress);
    if (trainer.save_due(step) && !trainer.save(step)) {
      result.last_step = step;
      break;
    }
  }
  trainer.finish();
  return result;
}

}  // namespace hp::train
