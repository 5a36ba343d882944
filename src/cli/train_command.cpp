#include "cli/train_command.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <sstream>

#include "cli/emulate_flags.hpp"
#include "cli/job.hpp"
#include "comm/mesh.hpp"
#include "cli/option_flags.hpp"
#include "cli/vision_flags.hpp"
#include "train/gpt_task.hpp"
#include "train/hybrid_task.hpp"
#include "schedule/advise.hpp"
#include "schedule/owner_search.hpp"
#include "train/trainer.hpp"
#include "train/verify.hpp"
#include "train/vl_task.hpp"

namespace hp::cli {
namespace {

struct TrainArgs {
  train::TrainOptions train;
  model::TransformerConfig model;  // the GPT, VL's text body, the Hybrid model's widths
  train::LmDataOptions data;       // gpt, hybrid
  int micro_batch_size = train::LmDataOptions().micro_batch_size;
  model::VisionConfig vision;      // --model vl
  model::HybridConfig hybrid;      // --model hybrid: the pattern, MoE and Mamba options
  std::string schedule = "interleaved";
  std::string dtype = "float32";
  std::string overflow = "full";
  std::string mpipe_body = "interleaved";
  std::string model_name = "gpt";
  std::string layers_per_stage;
  std::string fault;  // RANK:STEP:KIND
  JobOptions job;
  CLI::Option* vpp_flag = nullptr;  // unset: the schedule's default_vpp
};

struct TrainJob {
  train::TrainOptions options;
  std::unique_ptr<train::Task> task;
};

// The one place that knows the model families: --model picks the Task.
std::unique_ptr<train::Task> make_task(const TrainArgs& a, model::DType dtype) {
  model::TransformerConfig m = a.model;
  m.dtype = dtype;
  train::LmDataOptions data = a.data;
  data.micro_batch_size = a.micro_batch_size;
  std::vector<int> counts;
  if (!a.layers_per_stage.empty()) counts = layer_counts_from_flag(a.layers_per_stage);
  if (a.model_name != "vl" && a.vision.frozen) throw std::invalid_argument("--freeze-vision needs --model vl");
  if (a.model_name == "vl" && m.tensor_parallel.size > 1)
    throw std::invalid_argument("--tp " + std::to_string(m.tensor_parallel.size) +
                                ": --model vl is not tensor-parallel yet (its vision tower is whole on each rank); --tp"
                                " works with --model gpt and hybrid");
  if (a.model_name != "gpt" && m.context_parallel.size > 1)
    throw std::invalid_argument("--cp " + std::to_string(m.context_parallel.size) + ": --model " + a.model_name +
                                " is not context-parallel yet; --cp works with --model gpt");
  if (a.model_name == "gpt") {
    m.max_seq_len = data.seq_len;
    return std::make_unique<train::GptTask>(train::GptTaskOptions{m, counts, data});
  }
  if (a.model_name == "hybrid") {
    if (m.tie_embeddings) throw std::invalid_argument("--tie-embeddings: the Hybrid model keeps its own LM head");
    if (!counts.empty())
      throw std::invalid_argument("--layers-per-stage: a Hybrid model's stages are the | segments of --hybrid-pattern");
    m.max_seq_len = data.seq_len;
    train::HybridTaskOptions h;
    h.model = a.hybrid;
    h.model.base = m;
    h.model.base.mtp_num_layers = 0;  // the pattern's / parts
    h.model.mtp_loss_scaling = m.mtp_loss_scaling_factor;
    if (a.model.mtp_num_layers > 0)
      throw std::invalid_argument("--mtp-layers: a Hybrid model's MTP depths are the / parts of --hybrid-pattern "
                                  "(e.g. 'M*-E/*-/*-' for two)");
    h.data = data;
    return std::make_unique<train::HybridTask>(h);
  }
  if (a.model_name == "vl") {
    if (data.variable_seq_len)
      throw std::invalid_argument("--variable-seq-len: --model vl's captions have one length; it applies to --model gpt and hybrid");
    if (data.data != "embedded")
      throw std::invalid_argument("--data " + data.data +
                                  ": --model vl trains on its own synthetic captioned images; drop --data");
    if (!data.eval_data.empty())
      throw std::invalid_argument("--eval-data " + data.eval_data +
                                  ": --model vl evaluates on held-out synthetic images; drop --eval-data");
    train::VlTaskOptions vl;
    vl.text = m;
    vl.vision = a.vision;
    vl.layers_per_stage = counts;
    vl.micro_batch_size = a.micro_batch_size;
    return std::make_unique<train::VlTask>(vl);
  }
  throw std::invalid_argument("--model " + a.model_name + ": allowed: gpt, vl, hybrid");
}

// --overflow auto: the owners that minimise the simulated step with every
// layer (text and tower) costing the same (its emulated time, or forward 1
// and backward 2), so every rank computes the same owners before step 1.
void choose_train_owners(const TrainArgs& a, schedule::ScheduleOptions& s) {
  schedule::ModelProfile p;
  const auto& e = a.model.emulate;
  p.layers = a.model.num_layers;
  p.layer_f = e.forward_ms > 0 ? e.forward_ms : 1.0;
  p.layer_b = e.backward_ms > 0 ? e.backward_ms : 2 * p.layer_f;
  if (a.model_name == "vl") {
    p.tower_layers = a.vision.num_layers;
    p.tower_f = p.layer_f;
    p.tower_b = p.layer_b;
    p.frozen_preprocess = a.vision.frozen;
  }
  // The layout as the pipeline will run it: it finds a frozen tower's preprocess frozen.
  schedule::ScheduleOptions run = s;
  run.mpipe.frozen_preprocess = p.frozen_preprocess && s.mpipe.transpose_layers > 0;
  s.mpipe.owners = schedule::choose_owners(run, schedule::profile_costs(p, run)).owners;
}

// Turns the parsed flags into the options and task of a job of `world` ranks.
TrainJob resolve(const TrainArgs& a, int world) {
  TrainJob job;
  train::TrainOptions& o = job.options;
  o = a.train;
  auto& s = o.pipeline.schedule;
  if (!schedule::kind_from_name(a.schedule, &s.kind))
    throw std::invalid_argument("--schedule " + a.schedule +
                                ": unknown schedule; allowed: " + schedule::kind_names());
  const int tp = a.model.tensor_parallel.size, cp = a.model.context_parallel.size;
  if (o.dp < 1) throw std::invalid_argument("--dp must be >= 1, got " + std::to_string(o.dp));
  if (tp < 1) throw std::invalid_argument("--tp must be >= 1, got " + std::to_string(tp));
  if (cp < 1) throw std::invalid_argument("--cp must be >= 1, got " + std::to_string(cp));
  if (world % (o.dp * tp * cp) != 0)
    throw std::invalid_argument("--tp " + std::to_string(tp) + " x --cp " + std::to_string(cp) + " x --dp " +
                                std::to_string(o.dp) + " does not divide the job's " + std::to_string(world) +
                                " ranks (--nproc): the ranks are tp x cp x dp x pp; give --nproc a multiple of it");
  s.pp = world / (o.dp * tp * cp);
  apply_mpipe_flags(a.mpipe_body, a.overflow, a.vpp_flag->count() > 0, s);
  if (s.mpipe.overflow == schedule::Overflow::Auto && s.kind == schedule::ScheduleKind::MPipe)
    choose_train_owners(a, s);
  o.pipeline.executor.variable_seq_len = a.data.variable_seq_len;
  auto dtype = model::dtype_from_name(a.dtype);
  if (!dtype) throw std::invalid_argument("--dtype " + a.dtype + ": allowed: float32, float64");
  if (!a.fault.empty()) {
    std::stringstream in(a.fault);
    std::string rank, step;
    if (!std::getline(in, rank, ':') || !std::getline(in, step, ':') || !std::getline(in, o.fault.kind))
      throw std::invalid_argument("--inject-fault '" + a.fault + "': expected RANK:STEP:exit|hang|kill|stop|nospace");
    try {
      size_t used_rank = 0, used_step = 0;
      o.fault.rank = std::stoi(rank, &used_rank);
      o.fault.step = std::stoll(step, &used_step);
      if (used_rank != rank.size() || used_step != step.size()) throw std::invalid_argument(a.fault);
    } catch (const std::exception&) {
      throw std::invalid_argument("--inject-fault '" + a.fault + "': RANK and STEP must be integers (RANK:STEP:exit|hang|kill|stop|nospace)");
    }
  }
  job.task = make_task(a, *dtype);
  o.validate(*job.task);
  return job;
}

// The job's ranks as the trainer lays them out.
comm::MeshShape job_mesh(const TrainJob& job) {
  comm::MeshShape mesh;
  mesh.tp = job.task->tensor_parallel();
  mesh.cp = job.task->context_parallel();
  mesh.dp = job.options.dp;
  mesh.pp = job.options.pipeline.schedule.pp;
  return mesh;
}

// Error lines name pp as --nproc, or as --nproc over the other dimensions.
const FlagNames& flags_of(const TrainArgs& a) {
  return job_flags(a.train.dp * a.model.tensor_parallel.size * a.model.context_parallel.size > 1);
}

int train_rank(const TrainArgs& a, comm::ProcessGroup* pg) {
  const int world = pg ? pg->world_size() : 1;
  const TrainJob job = resolve(a, world);
  const auto& s = job.options.pipeline.schedule;
  if (!pg || pg->rank() == 0) {
    std::cout << "hyperpipe train: " << a.schedule << " pp=" << s.pp << " vpp=" << s.vpp << " mb=" << s.micro_batches;
    if (s.placement() == schedule::Placement::V) std::cout << " placement=v";
    if (s.kind == schedule::ScheduleKind::MPipe && s.mpipe.body != schedule::ScheduleKind::Interleaved)
      std::cout << " body=" << schedule::kind_name(s.mpipe.body);
    if (s.kind == schedule::ScheduleKind::MPipe && s.mpipe.overflow == schedule::Overflow::Auto)
      std::cout << " overflow=auto (owners " << schedule::format_owners(s.mpipe.owners) << ")";
    const comm::MeshShape mesh = job_mesh(job);
    if (mesh.dp > 1) std::cout << " dp=" << mesh.dp;
    if (mesh.tp > 1) std::cout << " tp=" << mesh.tp;
    if (mesh.cp > 1) std::cout << " cp=" << mesh.cp;
    std::cout << " | " << job.task->describe() << std::endl;
    if (mesh.world() > mesh.pp) {
      std::cout << "mesh: " << comm::describe_mesh(mesh);
      for (comm::MeshDim d : {comm::MeshDim::PP, comm::MeshDim::DP, comm::MeshDim::CP, comm::MeshDim::TP}) {
        if (mesh.size(d) == 1) continue;
        std::cout << "; " << comm::mesh_dim_name(d) << " groups";
        for (const auto& ranks : comm::mesh_groups(mesh, d)) {
          std::cout << " [";
          for (size_t i = 0; i < ranks.size(); ++i) std::cout << (i ? " " : "") << ranks[i];
          std::cout << "]";
        }
      }
      std::cout << std::endl;
    }
  }
  train::train(job.options, *job.task, pg);
  return 0;
}

// One step of the job's layout against one process, in double precision
// (train::verify); rank 0 prints the loss and every gradient's error, the
// worst first. Exits 1 past the tolerance.
int verify_rank(TrainArgs a, double tolerance, comm::ProcessGroup* pg) {
  a.dtype = "float64";
  const TrainJob job = resolve(a, pg ? pg->world_size() : 1);
  const train::VerifyReport r = train::verify(job.options, *job.task, pg);
  const bool ok = r.worst() <= tolerance;
  if (!pg || pg->rank() == 0) {
    const comm::MeshShape mesh = job_mesh(job);
    std::cout << "hyperpipe verify: " << a.schedule << " pp=" << job.options.pipeline.schedule.pp
              << " vpp=" << job.options.pipeline.schedule.vpp << " mb=" << job.options.pipeline.schedule.micro_batches
              << " dp=" << mesh.dp << " tp=" << mesh.tp << " cp=" << mesh.cp
              << " against one process, float64 | " << job.task->describe() << "\n";
    std::cout.precision(3);
    std::cout << "loss " << r.loss << " vs " << r.reference_loss << "  rel error " << std::scientific << r.loss_error
              << "\n";
    for (const auto& [name, e] : r.errors) {
      if (e < 0)
        std::cout << "  no gradient  " << name << "\n";
      else
        std::cout << "  " << e << "  " << name << "\n";
    }
    std::cout << (ok ? "OK" : "FAILED") << ": worst relative error " << r.worst() << " (tolerance " << tolerance << ")"
              << std::endl;
  }
  return ok ? 0 : 1;
}

// The flags of a training job (train and verify take the same).
CLI::Option* add_job_flags(CLI::App* cmd, const std::shared_ptr<TrainArgs>& a) {
  auto& t = a->train;
  auto& m = a->model;
  auto& hy = a->hybrid;
  auto& s = t.pipeline.schedule;
  cmd->add_option("--config", "TOML file whose keys are these flags' names (mb = 8); later flags override it");
  auto* nproc = cmd->add_option("--nproc", a->job.nproc, "local ranks to start (default 4); with RANK/WORLD_SIZE set this process is one rank");

  cmd->add_option("--schedule", a->schedule, schedule::kind_names())->capture_default_str();
  a->vpp_flag = cmd->add_option("--vpp", s.vpp, "model chunks per rank (default: 1, or 2 for interleaved and mpipe)");
  cmd->add_option("--mb", s.micro_batches, "micro-batches per step")->capture_default_str();
  cmd->add_option("--group-size", s.group_size, "micro-batch group size per virtual stage (0 = PP, or the smallest working size above it; MB when MB < PP)")->capture_default_str();
  cmd->add_option("--transpose-layers", s.mpipe.transpose_layers, "MPipe T")->capture_default_str();
  cmd->add_option("--overflow", a->overflow,
                  "MPipe overflow: full, min, or auto (owners that minimise the simulated step)")
      ->capture_default_str();
  cmd->add_option("--mpipe-body", a->mpipe_body, kMPipeBodyHelp)->capture_default_str();
  cmd->add_flag("--owner-backward", s.mpipe.owner_backward, "MPipe: owners run the preprocess backward");
  cmd->add_option("--model", a->model_name, "gpt; vl: a vision tower + projector before the GPT text body, on synthetic captioned images; hybrid: Mamba, attention, MLP and MoE layers from --hybrid-pattern")->capture_default_str();
  cmd->add_option("--hybrid-pattern", hy.pattern, "hybrid: M Mamba, * attention, - MLP, E mixture of experts, | pipeline segment (one per stage)")->capture_default_str();
  cmd->add_option("--moe-experts", hy.moe.num_experts, "hybrid: experts per E layer")->capture_default_str();
  cmd->add_flag("--overlap-moe-expert-parallel-comm", hy.moe.overlap_expert_parallel_comm,
                "hybrid: Megatron's expert all-to-all overlap; refused (no expert parallelism; rejected with mHC PP)");
  cmd->add_option("--moe-top-k", hy.moe.top_k, "hybrid: experts per token")->capture_default_str();
  cmd->add_option("--moe-aux-loss-coeff", hy.moe.aux_loss_coeff, "hybrid: weight of the load-balancing loss")->capture_default_str();
  cmd->add_option("--mamba-state", hy.mamba.state_size, "hybrid: state size N of the Mamba mixers")->capture_default_str();
  add_vision_flags(cmd, &a->vision);
  cmd->add_option("--micro-batch-size", a->micro_batch_size, "sequences per micro-batch")->capture_default_str();
  cmd->add_option("--seq-len", a->data.seq_len, "tokens per sequence (vl: fixed by the captions)")->capture_default_str();
  cmd->add_flag("--variable-seq-len", a->data.variable_seq_len,
                "each micro-batch's sequences get their own length in [seq-len/2, seq-len]; shapes travel with every message");
  cmd->add_option("--layers", m.num_layers, "transformer layers")->capture_default_str();
  cmd->add_option("--layers-per-stage", a->layers_per_stage, "explicit layer counts per global stage, e.g. 3,1,2,2");
  cmd->add_option("--hidden", m.hidden_size, "hidden size")->capture_default_str();
  cmd->add_option("--heads", m.num_attention_heads, "attention heads")->capture_default_str();
  cmd->add_option("--ffn-hidden", m.ffn_hidden_size, "MLP width (0 = 4 * hidden)")->capture_default_str();
  cmd->add_option("--vocab", m.vocab_size, "vocabulary size")->capture_default_str();
  cmd->add_flag("--tie-embeddings", m.tie_embeddings, "share the word embedding with the LM head");
  cmd->add_option("--mtp-layers", m.mtp_num_layers, "gpt: multi-token prediction depths (hybrid: / parts of the pattern)")
      ->capture_default_str();
  cmd->add_option("--mtp-loss-scaling", m.mtp_loss_scaling_factor, "weight of the mean MTP loss (gpt; hybrid too)")
      ->capture_default_str();
  cmd->add_option("--recompute-modules", m.recompute_modules, "selective recompute, comma-separated: mhc")
      ->capture_default_str();
  cmd->add_option("--mhc-recompute-layer-num", m.mhc_recompute_layer_num,
                  "with --recompute-modules mhc: the first N layers of each chunk (0: all)")
      ->capture_default_str();
  cmd->add_flag("--mhc", m.enable_mhc_connections, "multi-stream residuals (manifold-constrained hyper-connections)");
  cmd->add_option("--mhc-streams", m.mhc_num_residual_streams, "mHC: residual streams n")->capture_default_str();
  cmd->add_option("--mhc-sinkhorn-iterations", m.mhc_sinkhorn_iterations, "mHC: Sinkhorn-Knopp passes")
      ->capture_default_str();
  cmd->add_option("--mhc-init-gating-factor", m.mhc_init_gating_factor, "mHC: initial value of the gates")
      ->capture_default_str();
  cmd->add_option("--steps", t.steps, "number of the last step")->capture_default_str();
  cmd->add_option("--lr", t.lr.max_lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr", t.lr.min_lr, "learning rate at the end of the cosine decay")->capture_default_str();
  cmd->add_option("--warmup-steps", t.lr.warmup_steps, "linear warmup steps")->capture_default_str();
  cmd->add_option("--weight-decay", t.adam.weight_decay, "AdamW weight decay")->capture_default_str();
  cmd->add_option("--clip-grad", t.clip_grad, "global gradient-norm clip (0 = off)")->capture_default_str();
  cmd->add_option("--grad-accum", t.grad_accum, "pipeline runs per optimizer step")->capture_default_str();
  cmd->add_flag("--use-distributed-optimizer", t.distributed_optimizer,
                "shard the AdamW state over the --dp (x --cp) ranks (ZeRO-1)");
  cmd->add_option("--dp", t.dp, "data-parallel replicas of the pipeline: pp = ranks / (tp x cp x dp), a step reads dp x --mb micro-batches")
      ->capture_default_str();
  cmd->add_option("--tp", a->model.tensor_parallel.size,
                  "tensor-parallel ranks per stage (Megatron's: heads, MLP width and vocabulary split; --model gpt)")
      ->capture_default_str();
  cmd->add_option("--cp", a->model.context_parallel.size,
                  "context-parallel ranks per stage: each holds 2 of 2 x cp sequence chunks, attention gathers the"
                  " keys and values (--model gpt)")
      ->capture_default_str();
  cmd->add_flag("--sequence-parallel", a->model.tensor_parallel.sequence_parallel,
                "with --tp: split the activations outside the tensor-parallel regions along the sequence too");
  cmd->add_option("--seed", m.seed, "seed of the initial weights and of the batches")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "float32 or float64")->capture_default_str();
  cmd->add_option("--data", a->data.data, "embedded, text:PATH, u16:PATH[:VOCAB], u32:PATH[:VOCAB]")->capture_default_str();
  cmd->add_option("--save", t.save, "checkpoint directory (written at the end)");
  cmd->add_option("--save-interval", t.save_interval, "also checkpoint every N steps")->capture_default_str();
  cmd->add_option("--keep-last", t.keep.keep_last, "keep the newest N checkpoints (0 = all); never the one latest names")
      ->capture_default_str();
  cmd->add_option("--keep-every", t.keep.keep_every, "with --keep-last: also keep the steps that are multiples of K")
      ->capture_default_str();
  cmd->add_option("--save-failures", t.save_failures, "a failed save: stop (the job fails) or continue (warn, train on)")
      ->capture_default_str();
  cmd->add_option("--load", t.load, "resume from this checkpoint directory");
  cmd->add_option("--metrics", t.metrics, "JSON lines, one per step");
  cmd->add_option("--trace", t.trace.chrome, "the last step, measured on every rank, as one Chrome trace JSON");
  cmd->add_option("--timeline", t.trace.timeline, "the last step, measured, as an SVG timeline (one pipeline)");
  cmd->add_flag("--simulate", t.trace.simulate, "with --timeline: the simulated step, from the measured costs, below it");
  cmd->add_option("--eval-interval", t.eval_interval, "held-out loss every N steps and after the last (0 = never)")
      ->capture_default_str();
  cmd->add_option("--eval-iters", t.eval_iters, "held-out batches per evaluation")->capture_default_str();
  cmd->add_option("--eval-data", a->data.eval_data,
                  "held-out tokens (same forms as --data); default: the embedded corpus's held-out tail");
  cmd->add_option("--log-interval", t.log_interval, "steps between log lines (no TTY)")->capture_default_str();
  cmd->add_flag("--pseudo-deallocate", t.pipeline.executor.pseudo_deallocate, "free sent activations' storage");
  add_emulate_flags(cmd, &a->model.emulate);
  cmd->add_option("--inject-fault", a->fault, "testing: RANK:STEP:exit|hang|kill|stop|nospace makes that rank fail at that step (nospace: its save)");
  cmd->add_option("--timeout", a->job.timeout_s, "seconds before a silent peer is declared dead")->capture_default_str();
  return nproc;
}

}  // namespace

void add_train_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a GPT with pipeline parallelism (default: PP=4 interleaved, embedded corpus)");
  auto* nproc = add_job_flags(cmd, a);
  cmd->callback([a, exit_code, nproc] {
    a->job.nproc_given = nproc->count() > 0;
    *exit_code = run_job_reporting(
        "train", flags_of(*a), a->job, [a](int world) { resolve(*a, world); },
        [a](comm::ProcessGroup* pg) { return train_rank(*a, pg); });
  });
}

void add_verify_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto tolerance = std::make_shared<double>(1e-10);
  auto* cmd = app.add_subcommand("verify",
                                 "Check one step of a training layout (train's flags) against one process, in float64:"
                                 " the loss and every gradient by name");
  auto* nproc = add_job_flags(cmd, a);
  cmd->add_option("--tolerance", *tolerance, "largest relative error accepted")->capture_default_str();
  cmd->callback([a, exit_code, nproc, tolerance] {
    a->job.nproc_given = nproc->count() > 0;
    if (!(*tolerance >= 0)) throw CLI::ValidationError("--tolerance", "must be a number >= 0");
    *exit_code = run_job_reporting(
        "verify", flags_of(*a), a->job,
        [a](int world) { resolve(*a, world); }, [a, tolerance](comm::ProcessGroup* pg) { return verify_rank(*a, *tolerance, pg); });
  });
}

}  // namespace hp::cli
