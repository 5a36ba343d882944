#include "runtime/pipeline.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

#include "comm/p2p.hpp"
#include "comm/process_group.hpp"
#include "model/gpt.hpp"
#include "model/lm_loss.hpp"
#include "model/partition.hpp"
#include "runtime/microbatch.hpp"
#include "runtime/stage.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"

namespace hp::runtime {
namespace {

model::Partition make_partition(const PipelineOptions& o) {
  const auto& s = o.schedule;
  if (o.layers_per_stage.empty()) return model::Partition::even(o.model.num_layers, s.pp, s.vpp);
  return model::Partition::from_counts(o.model.num_layers, s.pp, s.vpp, o.layers_per_stage);
}

at::ScalarType scalar_type(model::DType d) { return d == model::DType::Float64 ? at::kDouble : at::kFloat; }

}  // namespace

Pipeline::Pipeline(const PipelineOptions& options, int rank, comm::ProcessGroup* pg)
    : options_(options), rank_(rank), pg_(pg) {
  options_.model.validate();
  options_.schedule.layers = options_.model.num_layers;
  schedule::check_options(options_.schedule);
  partition_ = std::make_unique<model::Partition>(make_partition(options_));
  if (rank < 0 || rank >= options_.schedule.pp)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside --pp " +
                                std::to_string(options_.schedule.pp));
  const schedule::Schedule sched = schedule::generate(options_.schedule);
  if (auto v = schedule::validate(sched); !v.ok())
    throw std::invalid_argument("the generated schedule is invalid:\n" + v.to_string());
  actions_ = sched.ranks[rank];

  chunks_ = model::build_rank_chunks(options_.model, *partition_, rank);
  std::map<std::string, at::Tensor> seen;
  std::map<int, Stage*> stage_ptrs;
  for (auto& chunk : chunks_) {
    // A tied copy held twice by this rank (one rank, several chunks) shares
    // storage with the first, so one optimizer update moves both.
    for (auto& p : chunk->named_parameters()) {
      auto [it, fresh] = seen.emplace(p.key(), p.value());
      if (!fresh) p.value().set_data(it->second.data());
    }
    auto c = chunk;
    stages_.push_back(std::make_unique<Stage>(chunk->stage(), chunk->is_first(), chunk->is_last(),
                                              [c](const at::Tensor& x) { return c->forward(x); }));
    stage_ptrs[chunk->stage()] = stages_.back().get();
  }
  const int64_t hidden = options_.model.hidden_size;
  executor_ = std::make_unique<Executor>(
      options_.schedule, rank, pg, stage_ptrs, [](const at::Tensor& out, const at::Tensor& labels) {
        return model::lm_loss(out, labels);
      },
      [this, hidden](int, int m) { return std::vector<int64_t>{rows_.at(m), seq_lens_.at(m), hidden}; },
      at::TensorOptions().dtype(scalar_type(options_.model.dtype)), options_.executor);
}

Pipeline::~Pipeline() = default;

StepResult Pipeline::step(const std::vector<at::Tensor>& micro_tokens) {
  const int mb = options_.schedule.micro_batches;
  if (static_cast<int>(micro_tokens.size()) != mb)
    throw std::invalid_argument("the step got " + std::to_string(micro_tokens.size()) +
                                " micro-batches but --mb is " + std::to_string(mb));
  std::vector<MicroBatch> micros;
  StepResult result;
  rows_.clear();
  seq_lens_.clear();
  for (const auto& t : micro_tokens) {
    if (t.dim() != 2 || t.size(1) < 2)
      throw std::invalid_argument("a micro-batch must be token ids [rows, seq + 1] with seq >= 1");
    if (!options_.executor.variable_seq_len && t.size(1) != micro_tokens[0].size(1))
      throw std::invalid_argument("micro-batches have different sequence lengths; enable variable_seq_len");
    MicroBatch m;
    m.input = t.slice(1, 0, t.size(1) - 1);
    m.labels = t.slice(1, 1, t.size(1));
    result.tokens += m.labels.numel();
    rows_.push_back(t.size(0));
    seq_lens_.push_back(t.size(1) - 1);
    micros.push_back(std::move(m));
  }
  for (auto& m : micros) m.loss_weight = static_cast<double>(m.labels.numel()) / result.tokens;
  double loss = executor_->run(actions_, micros);
  if (pg_ && options_.schedule.pp > 1) {
    at::Tensor t = at::full({1}, loss, at::kDouble);
    pg_->all_reduce(t);
    loss = t.item<double>();
  }
  result.loss = loss;
  return result;
}

StepResult Pipeline::step_batch(const at::Tensor& tokens) {
  return step(split_microbatches(tokens, options_.schedule.micro_batches));
}

std::map<std::string, at::Tensor> Pipeline::named_parameters() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& chunk : chunks_)
    for (const auto& p : chunk->named_parameters()) out.emplace(p.key(), p.value());
  return out;
}

void Pipeline::reduce_tied_grads() {
  const int pp = options_.schedule.pp;
  const int last_rank = pp - 1;
  // The tied copies live on stage 0 (rank 0, chunk 0) and the last stage (rank pp-1, last chunk).
  std::vector<std::pair<std::string, at::Tensor>> tied;
  for (const auto& chunk : chunks_)
    for (const auto& name : chunk->tied_parameter_names()) tied.emplace_back(name, chunk->named_parameters()[name]);
  if (tied.empty()) return;
  if (pp == 1) {
    // Both copies on this rank: each gets the sum.
    std::map<std::string, at::Tensor> sum;
    for (auto& [name, p] : tied) {
      if (!p.grad().defined()) continue;
      auto [it, fresh] = sum.emplace(name, p.grad().clone());
      if (!fresh) it->second += p.grad();
    }
    for (auto& [name, p] : tied)
      if (p.grad().defined()) p.mutable_grad().copy_(sum.at(name));
    return;
  }
  const int peer = rank_ == 0 ? last_rank : 0;
  for (auto& [name, p] : tied) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    // Stage index num_stages names no real edge, so this never meets a pipeline message.
    comm::P2P p2p(*pg_);
    const int tied_stage = options_.schedule.num_stages();
    at::Tensor mine = p.grad().clone();
    at::Tensor theirs = at::empty_like(mine);
    comm::Work s = p2p.isend(mine, peer, comm::MessageKind::Gradient, tied_stage, 0);
    comm::Work r = p2p.irecv(theirs, peer, comm::MessageKind::Gradient, tied_stage, 0);
    s.wait();
    r.wait();
    p.mutable_grad().add_(theirs);
  }
}

std::vector<std::string> Pipeline::duplicate_parameter_names() const {
  if (options_.schedule.pp == 1 || rank_ == 0) return {};
  std::vector<std::string> out;
  for (const auto& chunk : chunks_)
    for (const auto& name : chunk->tied_parameter_names()) out.push_back(name);
  return out;
}

void Pipeline::zero_grad() {
  for (const auto& chunk : chunks_)
    for (auto& p : chunk->parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
}

}  // namespace hp::runtime
