#include "runtime/pipeline.hpp"

#include <ATen/ATen.h>

#include <set>
#include <stdexcept>

#include "comm/process_group.hpp"
#include "runtime/action_trace.hpp"
#include "runtime/executor.hpp"
#include "runtime/grad_reducer.hpp"
#include "runtime/mpipe_runtime.hpp"
#include "runtime/stage.hpp"
#include "runtime/tied_parameters.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"

namespace hp::runtime {
namespace {

std::string str(int v) { return std::to_string(v); }

bool is_mpipe(const PipelineOptions& o) { return o.schedule.kind == schedule::ScheduleKind::MPipe; }

bool any_trainable(const NamedTensors& params) {
  for (const auto& [name, p] : params)
    if (p.requires_grad()) return true;
  return false;
}

// The stages a rank must hand in: chunk c runs global stage s.stage_of(rank, c).
std::set<int> expected_stages(const schedule::ScheduleOptions& s, int rank) {
  std::set<int> out;
  for (int c = 0; c < s.vpp; ++c) out.insert(s.stage_of(rank, c));
  return out;
}

std::string list(const std::set<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + str(x);
  return "{" + out + "}";
}

}  // namespace

void validate_pipeline_options(const PipelineOptions& o) {
  schedule::ScheduleOptions s = o.schedule;
  s.layers = 0;  // layer counts are the model's business (it checks T against its stage 0)
  schedule::check_options(s);
}

Pipeline::Pipeline(const PipelineOptions& options, int rank, comm::ProcessGroup* pg, RankModel model,
                   comm::ProcessGroup* dp)
    : options_(options), rank_(rank), pg_(pg), dp_(dp && dp->world_size() > 1 ? dp : nullptr), model_(std::move(model)) {
  auto& layout = options_.schedule;
  layout.layers = 0;
  const bool mpipe = is_mpipe(options_);
  if (model_.preprocess && !mpipe)
    throw std::invalid_argument("a preprocess module is only used by the MPipe schedule (schedule.kind mpipe)");
  if (mpipe && model_.preprocess) {
    // The schedule follows the module: a preprocess nobody trains is frozen.
    const bool trainable = any_trainable(model_.preprocess->parameters);
    if (trainable && layout.mpipe.frozen_preprocess)
      throw std::invalid_argument("schedule.mpipe.frozen_preprocess is set but the preprocess has trainable parameters");
    layout.mpipe.frozen_preprocess = !trainable;
  }
  validate_pipeline_options(options_);
  if (rank < 0 || rank >= layout.pp)
    throw std::invalid_argument("rank " + str(rank) + " is outside schedule.pp " + str(layout.pp));
  if (pg_ && pg_->world_size() != layout.pp)
    throw std::invalid_argument("schedule.pp " + str(layout.pp) + " but the process group has " +
                                str(pg_->world_size()) + " ranks");

  std::set<int> given;
  for (const auto& st : model_.stages) {
    if (!st.forward) throw std::invalid_argument("stage " + str(st.index) + " has no forward");
    if (!given.insert(st.index).second) throw std::invalid_argument("stage " + str(st.index) + " was given twice");
  }
  const std::set<int> expected = expected_stages(layout, rank);
  if (given != expected)
    throw std::invalid_argument("rank " + str(rank) + " of schedule.pp " + str(layout.pp) + " x schedule.vpp " +
                                str(layout.vpp) + " runs stages " + list(expected) + " but was given " +
                                list(given));
  const int last_stage = layout.num_stages() - 1;
  if (given.count(last_stage) && !model_.loss)
    throw std::invalid_argument("rank " + str(rank) + " holds the last stage but the model has no loss");

  // What this rank counts: its stages' parameters and, on rank 0, the
  // preprocess (the replicas elsewhere belong to rank 0).
  for (const auto& st : model_.stages) counted_.insert(counted_.end(), st.parameters.begin(), st.parameters.end());
  if (model_.preprocess && rank == 0)
    counted_.insert(counted_.end(), model_.preprocess->parameters.begin(), model_.preprocess->parameters.end());
  const std::set<std::string> tied(model_.tied_parameters.begin(), model_.tied_parameters.end());
  std::map<std::string, at::Tensor> first_copy;
  for (auto& [name, p] : counted_) {
    auto [it, fresh] = first_copy.emplace(name, p);
    if (fresh || p.unsafeGetTensorImpl() == it->second.unsafeGetTensorImpl()) continue;
    if (!tied.count(name))
      throw std::invalid_argument("parameter " + name + " is held twice on rank " + str(rank) +
                                  "; declare it in RankModel::tied_parameters if the copies are tied");
    if (!p.sizes().equals(it->second.sizes()) || p.scalar_type() != it->second.scalar_type())
      throw std::invalid_argument("the copies of tied parameter " + name + " on rank " + str(rank) +
                                  " differ in shape or dtype");
    // One rank, several copies: share storage, so one optimizer update moves all.
    p.set_data(it->second.data());
  }
  tied_ = std::make_unique<TiedParameters>(model_.tied_parameters, counted_, rank, pg_, layout.num_stages());

  // Stage 0's input needs a gradient only where the preprocess backward
  // consumes it; elsewhere it is data (tokens, pixels) or frozen features.
  const bool stage0_input_grad = mpipe && model_.preprocess && !layout.mpipe.frozen_preprocess;
  std::map<int, Stage*> stage_ptrs;
  for (const auto& st : model_.stages) {
    stages_.push_back(std::make_unique<Stage>(st.index, st.index == last_stage, st.forward));
    if (st.index == 0) stages_.back()->set_input_requires_grad(stage0_input_grad);
    stage_ptrs[st.index] = stages_.back().get();
  }
  if (options_.grad_bucket_bytes < 1)
    throw std::invalid_argument("grad_bucket_bytes must be positive, got " + std::to_string(options_.grad_bucket_bytes));
  if (!layout.forward_only) {
    train_ = make_runner(layout, stage_ptrs);
    if (train_.mpipe) train_.mpipe->check_structure();
    if (dp_) reduce_over_replicas();
  }
  schedule::ScheduleOptions forward_layout = layout;
  forward_layout.forward_only = true;
  forward_ = make_runner(forward_layout, stage_ptrs);
  if (layout.forward_only && forward_.mpipe) forward_.mpipe->check_structure();
}

// A stage's gradients are final after its last backward of the step: its
// buckets reduce from then on while the other stages' backwards run. Under a
// split backward that is its last W, whose products run outside autograd: no
// hook marks them ready, so flush launches them.
void Pipeline::reduce_over_replicas() {
  std::vector<GradReducer::Phase> phases;
  for (const auto& st : model_.stages) phases.push_back({st.index, st.parameters});
  // MPipe's preprocess (rank 0's) is final only after the owner-backward suffix.
  if (model_.preprocess && rank_ == 0) phases.push_back({-1, model_.preprocess->parameters});
  reducer_ = std::make_unique<GradReducer>(std::move(phases), dp_, options_.grad_bucket_bytes);
  std::map<int, schedule::Action> last;  // stage -> the backward after which its weights are final
  for (const auto& a : train_.actions)
    if (a.type == schedule::ActionType::BWD || a.type == schedule::ActionType::BWD_W) last[a.stage] = a;
  for (const auto type : {schedule::ActionType::BWD, schedule::ActionType::BWD_W}) {
    auto backward = train_.executor->handler(type);
    train_.executor->register_handler(type, [this, backward, last](const schedule::Action& a) {
      const bool final = sync_grads_ && last.at(a.stage) == a;
      if (final) reducer_->arm(a.stage);
      backward(a);
      if (final) reducer_->flush(a.stage);
    });
  }
}

Pipeline::Runner Pipeline::make_runner(schedule::ScheduleOptions layout, const std::map<int, Stage*>& stages) {
  const schedule::Schedule sched = schedule::generate(layout);
  if (auto v = schedule::validate(sched); !v.ok())
    throw std::invalid_argument("the generated schedule is invalid:\n" + v.to_string());
  Runner r;
  r.actions = sched.ranks[rank_];
  r.executor = std::make_unique<Executor>(layout, rank_, pg_, stages, model_.loss, model_.output_spec, options_.executor);
  if (is_mpipe(options_)) {
    r.mpipe = std::make_unique<MPipeRuntime>(layout, rank_, pg_, model_.preprocess);
    r.mpipe->install(*r.executor);
  }
  return r;
}

std::uint64_t Pipeline::Runner::run(const std::vector<MicroBatch>& micros, const std::vector<double>& weights,
                                    double* loss) {
  if (mpipe) mpipe->begin_step();
  *loss = executor->run(actions, micros, weights);
  if (!mpipe) return 0;
  mpipe->end_step();
  return mpipe->broadcast_stats().step_bytes;
}

Pipeline::~Pipeline() = default;

std::vector<int> Pipeline::input_micros() const {
  const auto& s = options_.schedule;
  std::vector<int> out;
  for (int m = 0; m < s.micro_batches; ++m) {
    const int reader = is_mpipe(options_) ? schedule::mpipe_owner(s, m) : 0;
    if (reader == rank_) out.push_back(m);
  }
  return out;
}

bool Pipeline::reads_targets() const {
  const auto& s = options_.schedule;
  return rank_ == s.rank_of(s.num_stages() - 1);
}

Reads Pipeline::reads() const { return Reads{input_micros(), reads_targets(), rank_ == 0}; }

std::vector<double> Pipeline::loss_weights(const std::vector<MicroBatch>& micros, bool required,
                                           double* tokens) const {
  const int mb = options_.schedule.micro_batches;
  if (static_cast<int>(micros.size()) != mb)
    throw std::invalid_argument("the step got " + str(static_cast<int>(micros.size())) +
                                " micro-batches but schedule.micro_batches is " + str(mb));
  // The loss is the mean over the step's target elements: micro m weighs its
  // share of them. Only the last stage's rank reads targets.
  *tokens = 0;
  std::vector<double> weights;
  if (!reads_targets()) return weights;
  for (int m = 0; m < mb; ++m) {
    if (micros[m].target.defined())
      *tokens += static_cast<double>(micros[m].target.numel());
    else if (required)
      throw std::invalid_argument("rank " + str(rank_) + " holds the last stage but micro-batch " + str(m) +
                                  " has no target");
  }
  // Data parallel: the share of the global batch's targets, times the
  // replicas, whose gradients are averaged. (The last stage's ranks of all
  // replicas form one dp group.)
  double total = *tokens, scale = 1.0;
  if (dp_) {
    at::Tensor t = at::full({1}, total, at::kDouble);
    dp_->all_reduce(t);
    total = t.item<double>();
    scale = dp_->world_size();
  }
  for (const auto& m : micros)
    weights.push_back(m.target.defined() ? scale * static_cast<double>(m.target.numel()) / total : 0.0);
  return weights;
}

StepResult Pipeline::reduce(double loss, double tokens, std::uint64_t bytes_broadcast) const {
  for (comm::ProcessGroup* g : {options_.schedule.pp > 1 ? pg_ : nullptr, dp_}) {
    if (!g) continue;
    at::Tensor t = at::tensor({loss, tokens}, at::kDouble);
    g->all_reduce(t);
    loss = t[0].item<double>();
    tokens = t[1].item<double>();
  }
  if (dp_) loss /= dp_->world_size();  // each replica's was scaled by the replicas
  StepResult result;
  result.loss = loss;
  result.tokens = static_cast<std::int64_t>(tokens);
  result.bytes_broadcast = bytes_broadcast;
  return result;
}

StepResult Pipeline::step(const std::vector<MicroBatch>& micros, bool sync_grads) {
  if (!train_.executor)
    throw std::logic_error("this pipeline was built with schedule.forward_only: it evaluates, it does not train");
  double tokens = 0, loss = 0;
  const std::vector<double> weights = loss_weights(micros, /*required=*/true, &tokens);
  sync_grads_ = sync_grads;
  const std::uint64_t bytes = train_.run(micros, weights, &loss);
  ActionTrace* trace = train_.executor->trace();
  const double t0 = trace ? trace->now_us() : 0;
  if (reducer_ && sync_grads) reducer_->finish();
  StepResult r = reduce(loss, tokens, bytes);
  // What the step waits for after its actions: the gradient buckets still in
  // flight and the loss reduction (which waits for the slowest rank).
  if (trace) trace->add({"gradient and loss reductions", "wait", schedule::Action{}, t0, trace->now_us(), 0});
  return r;
}

StepResult Pipeline::run_forward_only(const std::vector<MicroBatch>& micros, std::vector<at::Tensor>* outputs) {
  at::NoGradGuard no_grad;
  double tokens = 0, loss = 0;
  const std::vector<double> weights = loss_weights(micros, /*required=*/false, &tokens);
  const std::uint64_t bytes = forward_.run(micros, weights, &loss);
  if (outputs)
    for (auto& [m, out] : forward_.executor->take_outputs()) outputs->push_back(std::move(out));
  return reduce(loss, tokens, bytes);
}

StepResult Pipeline::evaluate(const std::vector<MicroBatch>& micros) { return run_forward_only(micros, nullptr); }

std::vector<at::Tensor> Pipeline::forward(const std::vector<MicroBatch>& micros) {
  std::vector<at::Tensor> outputs;
  run_forward_only(micros, &outputs);
  return outputs;
}

std::map<std::string, at::Tensor> Pipeline::named_parameters() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, p] : counted_) out.emplace(name, p);
  return out;
}

void Pipeline::reduce_tied_grads() { tied_->reduce_grads(); }

std::vector<std::string> Pipeline::duplicate_parameter_names() const { return tied_->duplicate_names(); }

void Pipeline::zero_grad() {
  auto zero = [](const NamedTensors& params) {
    for (const auto& [name, p] : params)
      if (p.grad().defined()) p.mutable_grad().zero_();
  };
  for (const auto& st : model_.stages) zero(st.parameters);
  // Every rank: owner-backward leaves the reduced sum on the replicas too.
  if (model_.preprocess) zero(model_.preprocess->parameters);
}

}  // namespace hp::runtime
