#include "runtime/pipeline.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

#include "comm/p2p.hpp"
#include "comm/process_group.hpp"
#include "model/gpt.hpp"
#include "model/lm_loss.hpp"
#include "model/partition.hpp"
#include "model/preprocess.hpp"
#include "model/vision.hpp"
#include "runtime/microbatch.hpp"
#include "runtime/mpipe_runtime.hpp"
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

bool is_mpipe(const PipelineOptions& o) { return o.schedule.kind == schedule::ScheduleKind::MPipe; }

// The schedule options as the generator sees them. The generator checks T
// against an even split of --layers; with explicit per-stage counts the
// partition is not even, so T is checked here against the real chunk instead.
// A VL model's T counts tower blocks, which the generator knows nothing of.
// Only a VL tower can be frozen; the flag then follows --freeze-vision.
schedule::ScheduleOptions schedule_options(const PipelineOptions& o) {
  schedule::ScheduleOptions s = o.schedule;
  const bool vl = o.model_kind == ModelKind::VL;
  s.layers = o.layers_per_stage.empty() && !vl ? o.model.num_layers : 0;
  if (vl) s.mpipe.frozen_preprocess = o.vision.frozen && s.mpipe.transpose_layers > 0;
  return s;
}

int transposed_layers(const PipelineOptions& o) { return is_mpipe(o) ? o.schedule.mpipe.transpose_layers : 0; }

}  // namespace

void validate_pipeline_options(const PipelineOptions& o) {
  o.model.validate();
  const model::Partition partition = make_partition(o);
  const bool vl = o.model_kind == ModelKind::VL;
  if (vl) {
    o.vision.validate();
    if (o.model.max_seq_len <= o.vision.num_patches())
      throw std::invalid_argument("a VL model's text positions (" + std::to_string(o.model.max_seq_len) +
                                  ") must exceed its " + std::to_string(o.vision.num_patches()) +
                                  " image patches, which come first");
    if (is_mpipe(o)) {
      const int t = o.schedule.mpipe.transpose_layers;
      if (t < 0 || t > o.vision.num_layers)
        throw std::invalid_argument("--transpose-layers counts vision tower blocks for --model vl: 0 <= T <= "
                                    "--vision-layers " + std::to_string(o.vision.num_layers) + ", got " +
                                    std::to_string(t));
    }
  } else if (o.schedule.mpipe.frozen_preprocess && is_mpipe(o)) {
    throw std::invalid_argument("--frozen-preprocess: a GPT preprocess always trains; freeze a VL tower instead "
                                "(--model vl --freeze-vision)");
  }
  if (is_mpipe(o) && o.schedule.pp >= 2 && !vl) {
    const int t = o.schedule.mpipe.transpose_layers;
    const int first = partition.count(0);
    if (t > 0 && t >= first)
      throw std::invalid_argument("--transpose-layers must be < " + std::to_string(first) +
                                  ", the layers of stage 0's first chunk (" + partition.describe() +
                                  "), so its body keeps a layer; got " + std::to_string(t));
  }
  schedule::check_options(schedule_options(o));
}

Pipeline::Pipeline(const PipelineOptions& options, int rank, comm::ProcessGroup* pg,
                   std::shared_ptr<model::Preprocess> preprocess)
    : options_(options), rank_(rank), pg_(pg) {
  validate_pipeline_options(options_);
  options_.schedule = schedule_options(options_);
  partition_ = std::make_unique<model::Partition>(make_partition(options_));
  if (rank < 0 || rank >= options_.schedule.pp)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is outside --pp " +
                                std::to_string(options_.schedule.pp));
  const schedule::Schedule sched = schedule::generate(options_.schedule);
  if (auto v = schedule::validate(sched); !v.ok())
    throw std::invalid_argument("the generated schedule is invalid:\n" + v.to_string());
  actions_ = sched.ranks[rank];

  const bool vl = options_.model_kind == ModelKind::VL;
  const int transposed = transposed_layers(options_);
  chunks_ = model::build_rank_chunks(options_.model, *partition_, rank);
  if (transposed > 0) {
    if (preprocess)
      preprocess_ = preprocess;
    else if (vl)
      preprocess_ = std::make_shared<model::VisionPreprocess>(options_.vision, options_.model, transposed);
    else
      preprocess_ = std::make_shared<model::GPTPreprocess>(options_.model, transposed);
    if (rank == 0 && !vl) {
      model::ChunkLayout body0;
      body0.stage = 0;
      body0.embedding = false;
      body0.head = partition_->is_last(0);
      body0.layer_begin = transposed;
      body0.layer_end = partition_->end(0);
      chunks_[0] = std::make_shared<model::GPTChunk>(options_.model, body0);
    }
  } else if (preprocess) {
    throw std::invalid_argument("a preprocess module is only used by --schedule mpipe with --transpose-layers >= 1");
  }
  if (vl) {
    prefix_len_ = options_.vision.num_patches();
    if (rank == 0 && transposed < options_.vision.num_layers)
      vision_ = std::make_shared<model::VisionTower>(options_.vision, options_.model, transposed,
                                                     options_.vision.num_layers);
  }
  // Stage 0's input needs a gradient only where the preprocess backward
  // consumes it; elsewhere it is data (tokens, pixels) or frozen features.
  const bool stage0_input_grad = transposed > 0 && !options_.schedule.mpipe.frozen_preprocess;
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
    if (vl && chunk->stage() == 0) {
      // The caption tokens come from the local batch; the input is pixels or
      // features, whatever the tower blocks on this stage start from.
      auto tower = vision_;
      stages_.push_back(std::make_unique<Stage>(
          0, true, chunk->is_last(), Stage::MicroForward([this, c, tower](int m, const at::Tensor& x) {
            return c->forward(executor_->micro(m).extra, tower ? tower->forward(x) : x);
          })));
    } else {
      stages_.push_back(std::make_unique<Stage>(chunk->stage(), chunk->is_first(), chunk->is_last(),
                                                Stage::Forward([c](const at::Tensor& x) { return c->forward(x); })));
    }
    if (chunk->stage() == 0) stages_.back()->set_input_requires_grad(stage0_input_grad);
    stage_ptrs[chunk->stage()] = stages_.back().get();
  }
  const int64_t hidden = options_.model.hidden_size;
  executor_ = std::make_unique<Executor>(
      options_.schedule, rank, pg, stage_ptrs,
      [](const at::Tensor& out, const at::Tensor& labels) {
        // VL: the logits of the image patches predict nothing.
        const int64_t n = labels.size(1);
        return model::lm_loss(out.size(1) == n ? out : out.narrow(1, out.size(1) - n, n), labels);
      },
      [this, hidden](int, int m) {
        return std::vector<int64_t>{rows_.at(m), prefix_len_ + seq_lens_.at(m), hidden};
      },
      at::TensorOptions().dtype(scalar_type(options_.model.dtype)), options_.executor);

  if (is_mpipe(options_)) {
    MPipeModel m;
    m.preprocess = preprocess_;
    // T = 0 ships stage 0's data input: token ids, or a VL model's pixels.
    const model::VisionConfig v = options_.vision;
    const auto dtype = scalar_type(options_.model.dtype);
    auto data_spec = [this, vl, v, dtype](int micro) {
      if (vl) return model::TensorSpec{{rows_.at(micro), 3, v.image_size, v.image_size}, dtype};
      return model::TensorSpec{{rows_.at(micro), seq_lens_.at(micro)}, at::kLong};
    };
    m.input_spec = [this, data_spec](int micro) {
      if (!preprocess_) return data_spec(micro);
      return preprocess_->input_spec(rows_.at(micro), seq_lens_.at(micro));
    };
    m.feature_spec = [this, data_spec](int micro) {
      if (!preprocess_) return data_spec(micro);
      return preprocess_->output_spec(rows_.at(micro), seq_lens_.at(micro));
    };
    mpipe_ = std::make_unique<MPipeRuntime>(options_.schedule, rank, pg, std::move(m));
    mpipe_->install(*executor_);
    mpipe_->check_structure();
  }
}

Pipeline::~Pipeline() = default;

StepResult Pipeline::step(const std::vector<at::Tensor>& micro_tokens) {
  if (options_.model_kind == ModelKind::VL)
    throw std::invalid_argument("a VL pipeline steps on captions and images: step(captions, images)");
  return step(micro_tokens, {});
}

StepResult Pipeline::step(const std::vector<at::Tensor>& micro_tokens, const std::vector<at::Tensor>& micro_images) {
  const int mb = options_.schedule.micro_batches;
  const bool vl = options_.model_kind == ModelKind::VL;
  if (static_cast<int>(micro_tokens.size()) != mb)
    throw std::invalid_argument("the step got " + std::to_string(micro_tokens.size()) +
                                " micro-batches but --mb is " + std::to_string(mb));
  if (vl && static_cast<int>(micro_images.size()) != mb)
    throw std::invalid_argument("the step got " + std::to_string(micro_images.size()) + " image micro-batches for " +
                                std::to_string(mb) + " caption micro-batches");
  if (!vl && !micro_images.empty()) throw std::invalid_argument("a GPT pipeline takes no images");
  std::vector<MicroBatch> micros;
  StepResult result;
  rows_.clear();
  seq_lens_.clear();
  for (size_t i = 0; i < micro_tokens.size(); ++i) {
    const at::Tensor& t = micro_tokens[i];
    if (t.dim() != 2 || t.size(1) < 2)
      throw std::invalid_argument("a micro-batch must be token ids [rows, seq + 1] with seq >= 1");
    if (!options_.executor.variable_seq_len && t.size(1) != micro_tokens[0].size(1))
      throw std::invalid_argument("micro-batches have different sequence lengths; enable variable_seq_len");
    MicroBatch m;
    m.input = t.slice(1, 0, t.size(1) - 1);
    m.labels = t.slice(1, 1, t.size(1));
    if (vl) {
      m.extra = m.input;
      m.input = micro_images[i];
      if (m.input.defined() && m.input.size(0) != t.size(0))
        throw std::invalid_argument("micro-batch " + std::to_string(i) + " has " + std::to_string(m.input.size(0)) +
                                    " images for " + std::to_string(t.size(0)) + " captions");
    }
    result.tokens += m.labels.numel();
    rows_.push_back(t.size(0));
    seq_lens_.push_back(t.size(1) - 1);
    micros.push_back(std::move(m));
  }
  for (auto& m : micros) m.loss_weight = static_cast<double>(m.labels.numel()) / result.tokens;
  if (mpipe_) mpipe_->begin_step();
  double loss = executor_->run(actions_, micros);
  if (mpipe_) {
    mpipe_->end_step();
    result.bytes_broadcast = mpipe_->broadcast_stats().step_bytes;
  }
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
  if (vision_)
    for (const auto& [name, p] : vision_->global_parameters()) out.emplace(name, p);
  // The replicas on other ranks are not theirs: rank 0 owns the preprocess.
  if (preprocess_ && rank_ == 0)
    for (const auto& [name, p] : preprocess_->named_parameters()) out.emplace(name, p);
  return out;
}

void Pipeline::reduce_tied_grads() {
  const int pp = options_.schedule.pp;
  const int last_rank = pp - 1;
  // The tied copies live on stage 0 (rank 0, chunk 0) and the last stage (rank pp-1, last chunk).
  std::vector<std::pair<std::string, at::Tensor>> tied;
  for (const auto& chunk : chunks_)
    for (const auto& name : chunk->tied_parameter_names()) tied.emplace_back(name, chunk->named_parameters()[name]);
  // MPipe: rank 0's first copy of a tied embedding is in the preprocess.
  if (preprocess_ && rank_ == 0) {
    const auto params = preprocess_->named_parameters();
    for (const auto& name : preprocess_->tied_parameter_names())
      for (const auto& [n, p] : params)
        if (n == name) tied.emplace_back(name, p);
  }
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
  if (vision_)
    for (auto& [name, p] : vision_->global_parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
  // Every rank: owner-backward leaves the reduced sum on the replicas too.
  if (preprocess_)
    for (auto& [name, p] : preprocess_->named_parameters())
      if (p.grad().defined()) p.mutable_grad().zero_();
}

}  // namespace hp::runtime
