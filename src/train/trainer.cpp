#include "train/trainer.hpp"

#include <ATen/ATen.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include "comm/process_group.hpp"
#include "data/batch_sampler.hpp"
#include "data/token_source.hpp"
#include "model/partition.hpp"
#include "model/vl_data.hpp"
#include "runtime/microbatch.hpp"
#include "schedule/generate.hpp"
#include "train/checkpoint.hpp"
#include "train/grad_clip.hpp"
#include "train/metrics.hpp"

namespace hp::train {
namespace {

at::Tensor to_tensor(const data::Batch& b) {
  return at::tensor(b.tokens, at::kLong).view({b.batch_size, b.seq_len + 1});
}

data::BatchOptions batch_options(const TrainOptions& o) {
  data::BatchOptions b;
  b.batch_size = o.micro_batch_size * o.pipeline.schedule.micro_batches;
  b.seq_len = o.seq_len;
  b.seed = o.pipeline.model.seed;
  return b;
}

// What a checkpoint must agree on to load into this model (the layout may differ).
std::string model_shape_json(const runtime::PipelineOptions& p) {
  const model::TransformerConfig& m = p.model;
  nlohmann::json j;
  j["layers"] = m.num_layers;
  j["hidden"] = m.hidden_size;
  j["heads"] = m.num_attention_heads;
  j["ffn-hidden"] = m.ffn_hidden();
  j["vocab"] = m.vocab_size;
  j["tie-embeddings"] = m.tie_embeddings;
  if (p.model_kind == runtime::ModelKind::VL) {
    // A frozen tower has the same shape: freezing may change between runs.
    j["model"] = "vl";
    j["vision-layers"] = p.vision.num_layers;
    j["image-size"] = p.vision.image_size;
    j["patch-size"] = p.vision.patch_size;
    j["vision-hidden"] = p.vision.hidden_size;
    j["vision-heads"] = p.vision.num_attention_heads;
  }
  return j.dump();
}

LrScheduleOptions lr_options(const TrainOptions& o) {
  LrScheduleOptions lr = o.lr;
  lr.decay_steps = std::max<std::int64_t>(o.steps, std::max<std::int64_t>(1, lr.warmup_steps));
  return lr;
}

// One status line per log interval, or a progress bar redrawn in place on a terminal.
class Progress {
 public:
  Progress(std::int64_t first, std::int64_t last, int interval)
      : first_(first), last_(last), interval_(std::max(1, interval)), tty_(::isatty(STDOUT_FILENO)) {}

  void update(std::int64_t step, double loss, double lr, double step_ms, double tokens_per_s) {
    std::ostringstream line;
    line.precision(4);
    line << "step " << step << "/" << last_ << "  loss " << loss << "  lr " << lr << "  " << step_ms
         << " ms/step  " << static_cast<long long>(tokens_per_s) << " tok/s";
    if (tty_) {
      const int width = 30;
      const double done = static_cast<double>(step - first_ + 1) / static_cast<double>(last_ - first_ + 1);
      const int filled = static_cast<int>(done * width);
      std::cout << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << line.str()
                << "   " << std::flush;
      if (step == last_) std::cout << "\n";
    } else if ((step - first_ + 1) % interval_ == 0 || step == first_ || step == last_) {
      std::cout << line.str() << std::endl;
    }
  }

 private:
  std::int64_t first_, last_;
  int interval_;
  bool tty_;
};

// One pipeline run of a VL model on batch `index` of the synthetic captioned
// images. Under MPipe a rank keeps only the images of the micros it owns: the
// per-rank read of spec section 5.5 (the others never look at them).
runtime::StepResult vl_step(runtime::Pipeline& pipeline, const TrainOptions& o, std::int64_t index, int rank) {
  const auto& p = o.pipeline;
  const int rows = o.micro_batch_size * p.schedule.micro_batches;
  const auto batch = model::make_vl_batch(p.vision, rows, p.model.seed, index * rows,
                                          p.model.dtype == model::DType::Float64 ? at::kDouble : at::kFloat);
  auto captions = runtime::split_microbatches(batch.captions, p.schedule.micro_batches);
  auto images = runtime::split_microbatches(batch.images, p.schedule.micro_batches);
  if (p.schedule.kind == schedule::ScheduleKind::MPipe)
    for (int m = 0; m < p.schedule.micro_batches; ++m)
      if (schedule::mpipe_owner(p.schedule, m) != rank) images[m] = at::Tensor();
  return pipeline.step(captions, images);
}

void validate_data_source(const TrainOptions& o);
void validate_checkpoint_shape(const TrainOptions& o);

}  // namespace

void TrainOptions::validate() const {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  if (micro_batch_size < 1) fail("--micro-batch-size must be >= 1, got " + std::to_string(micro_batch_size));
  if (seq_len < 1) fail("--seq-len must be >= 1, got " + std::to_string(seq_len));
  if (seq_len > pipeline.model.max_seq_len)
    fail("--seq-len " + std::to_string(seq_len) + " exceeds the model's position table (" +
         std::to_string(pipeline.model.max_seq_len) + ")");
  if (grad_accum < 1) fail("--grad-accum must be >= 1, got " + std::to_string(grad_accum));
  if (steps < 1) fail("--steps must be >= 1, got " + std::to_string(steps));
  if (clip_grad < 0) fail("--clip-grad must be >= 0, got " + std::to_string(clip_grad));
  if (save_interval < 0) fail("--save-interval must be >= 0");
  if (fault.rank >= 0 && fault.kind != "exit" && fault.kind != "hang")
    fail("--inject-fault: the kind must be exit or hang, got " + fault.kind);
  if (save_interval > 0 && save.empty()) fail("--save-interval needs --save DIR");
  adam.validate();
  lr_options(*this).validate();
  runtime::validate_pipeline_options(pipeline);
  if (pipeline.model_kind == runtime::ModelKind::VL) {
    if (data != "embedded")
      fail("--data " + data + ": --model vl trains on its own synthetic captioned images; drop --data");
    const int words = static_cast<int>(model::vl_vocabulary().size());
    if (pipeline.model.vocab_size < words)
      fail("--vocab " + std::to_string(pipeline.model.vocab_size) + " is too small for --model vl's " +
           std::to_string(words) + " caption words");
    if (seq_len != model::kVLCaptionTokens - 1)
      fail("--model vl: captions have " + std::to_string(model::kVLCaptionTokens - 1) + " input tokens, so --seq-len " +
           "must be " + std::to_string(model::kVLCaptionTokens - 1) + ", got " + std::to_string(seq_len));
  } else {
    validate_data_source(*this);
  }
  if (!load.empty()) validate_checkpoint_shape(*this);
}

namespace {

void validate_data_source(const TrainOptions& o) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  const std::string& data = o.data;
  const int seq_len = o.seq_len;
  const auto& pipeline = o.pipeline;
  auto src = data::open_source(data);
  if (src->vocab_size() > pipeline.model.vocab_size)
    fail("--data " + data + " has token ids up to " + std::to_string(src->vocab_size() - 1) + " but --vocab is " +
         std::to_string(pipeline.model.vocab_size));
  if (src->size() < static_cast<std::size_t>(seq_len) + 1)
    fail("--data " + data + " is shorter than --seq-len + 1 tokens");
}

void validate_checkpoint_shape(const TrainOptions& o) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  const std::string& load = o.load;
  const auto& pipeline = o.pipeline;
  {
    const std::string dir = resolve_checkpoint(load);
    std::ifstream in(dir + "/meta.json");
    const auto meta = nlohmann::json::parse(in, nullptr, false);
    const std::string saved = meta.is_object() && meta.contains("metadata") ? meta["metadata"].dump() : "";
    const std::string mine = model_shape_json(pipeline);
    if (!saved.empty() && nlohmann::json::parse(saved) != nlohmann::json::parse(mine))
      fail("--load " + load + ": the checkpoint is of a model " + saved + " but this run builds " + mine);
  }
}

}  // namespace

TrainResult train(const TrainOptions& o, comm::ProcessGroup* pg) {
  o.validate();
  const int rank = pg ? pg->rank() : 0;
  runtime::Pipeline pipeline(o.pipeline, rank, pg);
  const bool vl = o.pipeline.model_kind == runtime::ModelKind::VL;
  std::unique_ptr<data::TokenSource> src;
  if (!vl) src = data::open_source(o.data);
  const auto batch_opts = batch_options(o);
  const auto lr_opts = lr_options(o);

  NamedParams params = pipeline.named_parameters();
  AdamW adam(params, o.adam);
  std::int64_t first_step = 1;
  if (!o.load.empty()) first_step = restore_checkpoint(o.load, params, &adam).step + 1;
  auto barrier = [pg] {
    if (pg) pg->barrier();
  };
  auto all_reduce_sum = [pg](double x) {
    if (!pg || pg->world_size() == 1) return x;
    at::Tensor t = at::full({1}, x, at::kDouble);
    pg->all_reduce(t);
    return t.item<double>();
  };
  const auto dup = pipeline.duplicate_parameter_names();
  const std::set<std::string> duplicates(dup.begin(), dup.end());
  std::unique_ptr<MetricsWriter> metrics;
  if (rank == 0 && !o.metrics.empty()) metrics = std::make_unique<MetricsWriter>(o.metrics, first_step > 1);

  auto save = [&](std::int64_t step) {
    save_checkpoint(o.save, step, rank, pg ? pg->world_size() : 1, params, adam.state(),
                    model_shape_json(o.pipeline), barrier);
  };

  TrainResult result;
  result.first_step = first_step;
  result.last_step = o.steps;
  Progress progress(first_step, o.steps, o.log_interval);
  for (std::int64_t step = first_step; step <= o.steps; ++step) {
    if (o.fault.rank == rank && o.fault.step == step) {
      std::cerr << "rank " << rank << ": injected fault (" << o.fault.kind << ") at step " << step << std::endl;
      if (o.fault.kind == "hang")
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
      std::_Exit(17);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const comm::CommCounters before = pg ? pg->counters() : comm::CommCounters{};
    double loss = 0;
    std::int64_t tokens = 0;
    std::uint64_t bytes_broadcast = 0;
    for (int a = 0; a < o.grad_accum; ++a) {
      const std::int64_t index = (step - 1) * o.grad_accum + a;
      const auto r = vl ? vl_step(pipeline, o, index, rank) : pipeline.step_batch(to_tensor(data::sample_batch(*src, batch_opts, index)));
      loss += r.loss / o.grad_accum;
      tokens += r.tokens;
      bytes_broadcast += r.bytes_broadcast;
    }
    if (o.grad_accum > 1) {
      at::NoGradGuard guard;
      for (auto& [name, p] : params)
        if (p.grad().defined()) p.mutable_grad().div_(o.grad_accum);
    }
    pipeline.reduce_tied_grads();
    GradClipOptions clip;
    clip.max_norm = o.clip_grad;
    const double norm = clip_grad_norm(params, clip, all_reduce_sum, duplicates);
    const double lr = lr_at(lr_opts, step - 1);
    adam.step(lr);
    adam.zero_grad();
    pipeline.zero_grad();  // also the MPipe replicas, which the optimizer does not hold
    double bytes_sent = 0, bytes_received = 0;
    if (pg && pg->world_size() > 1) {
      const comm::CommCounters after = pg->counters();
      at::Tensor t = at::tensor({static_cast<double>(after.bytes_sent - before.bytes_sent),
                                 static_cast<double>(after.bytes_received - before.bytes_received)},
                                at::kDouble);
      pg->all_reduce(t);
      bytes_sent = t[0].item<double>();
      bytes_received = t[1].item<double>();
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    result.losses.push_back(loss);
    if (rank == 0) {
      const double tps = tokens / (ms / 1000.0);
      progress.update(step, loss, lr, ms, tps);
      if (metrics) {
        StepMetrics m;
        m.step = step;
        m.loss = loss;
        m.step_ms = ms;
        m.tokens_per_s = tps;
        m.lr = lr;
        m.grad_norm = norm;
        m.extra["bytes_broadcast"] = static_cast<double>(bytes_broadcast);
        m.extra["bytes_sent"] = bytes_sent;
        m.extra["bytes_received"] = bytes_received;
        metrics->write(m);
      }
    }
    if (!o.save.empty() && ((o.save_interval > 0 && step % o.save_interval == 0) || step == o.steps)) save(step);
  }
  return result;
}

}  // namespace hp::train
