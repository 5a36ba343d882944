#include "cli/train_command.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <sstream>

#include "cli/job.hpp"
#include "model/vl_data.hpp"
#include "train/trainer.hpp"

namespace hp::cli {
namespace {

struct TrainArgs {
  train::TrainOptions train;
  std::string schedule = "interleaved";
  std::string dtype = "float32";
  std::string overflow = "full";
  std::string model = "gpt";
  std::string layers_per_stage;
  std::string fault;  // RANK:STEP:KIND
  JobOptions job;
};

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string cell;
  while (std::getline(in, cell, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoi(cell, &used));
      if (used != cell.size()) throw std::invalid_argument(cell);
    } catch (const std::exception&) {
      throw std::invalid_argument("--layers-per-stage '" + text +
                                  "': expected comma-separated layer counts per global stage, e.g. 2,2,1,3");
    }
  }
  return out;
}

// Turns the parsed flags into TrainOptions for a job of `world` ranks.
train::TrainOptions resolve(const TrainArgs& a, int world) {
  train::TrainOptions o = a.train;
  auto& s = o.pipeline.schedule;
  if (!schedule::kind_from_name(a.schedule, &s.kind))
    throw std::invalid_argument("--schedule " + a.schedule +
                                ": unknown schedule; allowed: no-pipelining, gpipe, 1f1b, interleaved, mpipe");
  s.pp = world;
  if (a.overflow != "full" && a.overflow != "min")
    throw std::invalid_argument("--overflow " + a.overflow + ": allowed: full, min");
  s.mpipe.overflow = a.overflow == "min" ? schedule::Overflow::Min : schedule::Overflow::Full;
  auto dtype = model::dtype_from_name(a.dtype);
  if (!dtype) throw std::invalid_argument("--dtype " + a.dtype + ": allowed: float32, float64");
  o.pipeline.model.dtype = *dtype;
  if (a.model != "gpt" && a.model != "vl") throw std::invalid_argument("--model " + a.model + ": allowed: gpt, vl");
  if (a.model == "vl") {
    // The synthetic captions fix the text length; the patches come first.
    o.pipeline.model_kind = runtime::ModelKind::VL;
    o.seq_len = model::kVLCaptionTokens - 1;
    o.pipeline.vision.validate();
    o.pipeline.model.max_seq_len = o.pipeline.vision.num_patches() + o.seq_len;
  } else {
    if (o.pipeline.vision.frozen) throw std::invalid_argument("--freeze-vision needs --model vl");
    o.pipeline.model.max_seq_len = o.seq_len;
  }
  if (!a.layers_per_stage.empty()) o.pipeline.layers_per_stage = parse_counts(a.layers_per_stage);
  if (!a.fault.empty()) {
    std::stringstream in(a.fault);
    std::string rank, step;
    if (!std::getline(in, rank, ':') || !std::getline(in, step, ':') || !std::getline(in, o.fault.kind))
      throw std::invalid_argument("--inject-fault '" + a.fault + "': expected RANK:STEP:exit|hang");
    o.fault.rank = std::stoi(rank);
    o.fault.step = std::stoll(step);
  }
  o.validate();
  return o;
}

int train_rank(const TrainArgs& a, comm::ProcessGroup* pg) {
  const int world = pg ? pg->world_size() : 1;
  const train::TrainOptions o = resolve(a, world);
  if (!pg || pg->rank() == 0)
    std::cout << "hyperpipe train: " << a.schedule << " pp=" << world << " vpp=" << o.pipeline.schedule.vpp
              << " mb=" << o.pipeline.schedule.micro_batches << " micro-batch-size=" << o.micro_batch_size
              << " seq-len=" << o.seq_len << " | " << o.pipeline.model.describe()
              << (a.model == "vl" ? " | vl: --vision-layers " + std::to_string(o.pipeline.vision.num_layers) +
                                        " --image-size " + std::to_string(o.pipeline.vision.image_size) +
                                        (o.pipeline.vision.frozen ? " (frozen)" : "")
                                  : std::string())
              << std::endl;
  train::train(o, pg);
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto& t = a->train;
  auto& m = t.pipeline.model;
  auto& s = t.pipeline.schedule;
  s.vpp = 2;
  s.micro_batches = 8;
  m.num_layers = 8;
  t.lr.max_lr = 3e-3;
  t.lr.min_lr = 3e-4;
  t.lr.warmup_steps = 10;
  t.steps = 150;  // about a minute on 2 cores
  auto* cmd = app.add_subcommand("train", "Train a GPT with pipeline parallelism (default: PP=4 interleaved, embedded corpus)");
  cmd->add_option("--config", "TOML file whose keys are these flags' names (mb = 8); later flags override it");
  cmd->add_option("--nproc", a->job.nproc, "local ranks to start (default 4); with RANK/WORLD_SIZE set this process is one rank");
  cmd->add_option("--schedule", a->schedule, "no-pipelining, gpipe, 1f1b, interleaved or mpipe")->capture_default_str();
  cmd->add_option("--vpp", s.vpp, "model chunks per rank")->capture_default_str();
  cmd->add_option("--mb", s.micro_batches, "micro-batches per step")->capture_default_str();
  cmd->add_option("--group-size", s.group_size, "micro-batch group size per virtual stage (0 = PP, or the smallest working size above it)")->capture_default_str();
  cmd->add_option("--transpose-layers", s.mpipe.transpose_layers, "MPipe T")->capture_default_str();
  cmd->add_option("--overflow", a->overflow, "MPipe overflow: full or min")->capture_default_str();
  cmd->add_flag("--owner-backward", s.mpipe.owner_backward, "MPipe: owners run the preprocess backward");
  auto& v = t.pipeline.vision;
  cmd->add_option("--model", a->model, "gpt, or vl: a vision tower + projector before the GPT text body, on synthetic captioned images")->capture_default_str();
  cmd->add_option("--vision-layers", v.num_layers, "vl: vision tower blocks V (MPipe T counts these, 1..V)")->capture_default_str();
  cmd->add_flag("--freeze-vision", v.frozen, "vl: the tower does not train (MPipe broadcasts it once)");
  cmd->add_option("--image-size", v.image_size, "vl: pixels per image side")->capture_default_str();
  cmd->add_option("--patch-size", v.patch_size, "vl: pixels per patch side")->capture_default_str();
  cmd->add_option("--vision-hidden", v.hidden_size, "vl: tower width")->capture_default_str();
  cmd->add_option("--vision-heads", v.num_attention_heads, "vl: tower attention heads")->capture_default_str();
  cmd->add_option("--micro-batch-size", t.micro_batch_size, "sequences per micro-batch")->capture_default_str();
  cmd->add_option("--seq-len", t.seq_len, "tokens per sequence (vl: fixed by the captions)")->capture_default_str();
  cmd->add_option("--layers", m.num_layers, "transformer layers")->capture_default_str();
  cmd->add_option("--layers-per-stage", a->layers_per_stage, "explicit layer counts per global stage, e.g. 3,1,2,2");
  cmd->add_option("--hidden", m.hidden_size, "hidden size")->capture_default_str();
  cmd->add_option("--heads", m.num_attention_heads, "attention heads")->capture_default_str();
  cmd->add_option("--ffn-hidden", m.ffn_hidden_size, "MLP width (0 = 4 * hidden)")->capture_default_str();
  cmd->add_option("--vocab", m.vocab_size, "vocabulary size")->capture_default_str();
  cmd->add_flag("--tie-embeddings", m.tie_embeddings, "share the word embedding with the LM head");
  cmd->add_option("--steps", t.steps, "number of the last step")->capture_default_str();
  cmd->add_option("--lr", t.lr.max_lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr", t.lr.min_lr, "learning rate at the end of the cosine decay")->capture_default_str();
  cmd->add_option("--warmup-steps", t.lr.warmup_steps, "linear warmup steps")->capture_default_str();
  cmd->add_option("--weight-decay", t.adam.weight_decay, "AdamW weight decay")->capture_default_str();
  cmd->add_option("--clip-grad", t.clip_grad, "global gradient-norm clip (0 = off)")->capture_default_str();
  cmd->add_option("--grad-accum", t.grad_accum, "pipeline runs per optimizer step")->capture_default_str();
  cmd->add_option("--seed", m.seed, "seed of the initial weights and of the batches")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "float32 or float64")->capture_default_str();
  cmd->add_option("--data", t.data, "embedded, text:PATH, u16:PATH[:VOCAB], u32:PATH[:VOCAB]")->capture_default_str();
  cmd->add_option("--save", t.save, "checkpoint directory (written at the end)");
  cmd->add_option("--save-interval", t.save_interval, "also checkpoint every N steps")->capture_default_str();
  cmd->add_option("--load", t.load, "resume from this checkpoint directory");
  cmd->add_option("--metrics", t.metrics, "JSON lines, one per step");
  cmd->add_option("--log-interval", t.log_interval, "steps between log lines (no TTY)")->capture_default_str();
  cmd->add_flag("--pseudo-deallocate", t.pipeline.executor.pseudo_deallocate, "free sent activations' storage");
  cmd->add_option("--inject-fault", a->fault, "testing: RANK:STEP:exit|hang makes that rank fail at that step");
  cmd->add_option("--timeout", a->job.timeout_s, "seconds before a silent peer is declared dead")->capture_default_str();
  cmd->callback([a, exit_code] {
    const bool as_rank = comm::has_environment();
    try {
      *exit_code = run_job(
          a->job, [a](int world) { resolve(*a, world); },
          [a](comm::ProcessGroup* pg) { return train_rank(*a, pg); });
    } catch (const std::exception& e) {
      std::cerr << "hyperpipe train: error: " << e.what() << "\n";
      *exit_code = as_rank ? 1 : 2;
    }
  });
}

}  // namespace hp::cli
