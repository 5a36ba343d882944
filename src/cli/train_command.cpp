#include "cli/train_command.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "cli/emulate_flags.hpp"
#include "cli/family_options.hpp"
#include "cli/job.hpp"
#include "comm/mesh.hpp"
#include "data/tokenizer.hpp"
#include "family/model_family.hpp"
#include "launch/launcher.hpp"
#include "cli/option_flags.hpp"
#include "cli/option_schema.hpp"
#include "schedule/advise.hpp"
#include "schedule/owner_search.hpp"
#include "model/hybrid.hpp"
#include "model/vision_config.hpp"
#include "train/lm_data.hpp"
#include "train/trainer.hpp"
#include "train/verify.hpp"

namespace hp::cli {
namespace {

// What train and verify read from the command line (option_schema.hpp).
struct TrainArgs {
  CommandValues values;
  JobOptions job;
  train::TrainOptions train;       // its pipeline's schedule and executor too
  model::TransformerConfig model;  // the GPT, VL's text body, the Hybrid model's widths
  train::LmDataOptions data;       // gpt, hybrid; its micro-batch size is VL's too
  model::VisionConfig vision;      // --model vl
  model::HybridConfig hybrid;      // --model hybrid: the pattern, MoE and Mamba options
  RegisteredFlags flags;

  OptionRoots roots() {
    OptionRoots r;
    r.values = &values;
    r.job = &job;
    r.schedule = &train.pipeline.schedule;
    r.train = &train;
    r.executor = &train.pipeline.executor;
    r.model = &model;
    r.data = &data;
    r.vision = &vision;
    r.hybrid = &hybrid;
    return r;
  }
};

struct TrainJob {
  train::TrainOptions options;
  std::unique_ptr<train::Task> task;
};

// --model's family builds the Task (family/model_family.hpp).
// With --tokenizer-model the vocabulary is the tokenizer's.
std::unique_ptr<train::Task> make_task(const TrainArgs& a, model::DType dtype) {
  family::FamilyOptions o = family_options(a.values, a.model, a.data, a.vision, a.hybrid);
  o.model.dtype = dtype;
  if (!a.data.tokenizer_model.empty()) {
    const std::int64_t vocab = data::sentencepiece_tokenizer(a.data.tokenizer_model)->vocab_size();
    if (a.flags.given(a.model.vocab_size) && a.model.vocab_size != vocab)
      throw std::invalid_argument("--vocab " + std::to_string(a.model.vocab_size) + " disagrees with --tokenizer-model " +
                                  a.data.tokenizer_model + "'s " + std::to_string(vocab) +
                                  " pieces; drop --vocab (the tokenizer sets it)");
    o.model.vocab_size = static_cast<int>(vocab);
  }
  return family::find_family(a.values.model).make_task(o);
}

// --overflow auto: the owners that minimise the simulated step with every
// layer (text and tower) costing the same (its emulated time, or forward 1
// and backward 2), so every rank computes the same owners before step 1.
void choose_train_owners(const TrainArgs& a, schedule::ScheduleOptions& s) {
  const family::FamilyOptions o = family_options(a.values, a.model, a.data, a.vision, a.hybrid);
  const schedule::ModelProfile p = family::find_family(a.values.model).profile(o);
  // The layout as the pipeline will run it: it finds a frozen tower's preprocess frozen.
  schedule::ScheduleOptions run = s;
  run.mpipe.frozen_preprocess = p.frozen_preprocess && s.mpipe.transpose_layers > 0;
  s.mpipe.owners = schedule::choose_owners(run, schedule::profile_costs(p, run)).owners;
}

// --inject-fault RANK:STEP:KIND[:START], START a start of the job (0, the
// default: the first) or "every".
train::FaultInjection fault_from_flag(const std::string& fault) {
  const std::string form = "RANK:STEP:" + train::fault_kind_names("|") + "[:START|every]";
  train::FaultInjection f;
  std::stringstream in(fault);
  std::string rank, step, attempt;
  if (!std::getline(in, rank, ':') || !std::getline(in, step, ':') || !std::getline(in, f.kind, ':'))
    throw std::invalid_argument("--inject-fault '" + fault + "': expected " + form);
  std::getline(in, attempt);
  try {
    size_t used_rank = 0, used_step = 0, used_attempt = 0;
    f.rank = std::stoi(rank, &used_rank);
    f.step = std::stoll(step, &used_step);
    f.attempt = attempt.empty() ? 0 : attempt == "every" ? -1 : std::stoi(attempt, &used_attempt);
    if (used_rank != rank.size() || used_step != step.size() || (f.attempt >= 0 && used_attempt != attempt.size()) ||
        f.attempt < -1)
      throw std::invalid_argument(fault);
  } catch (const std::exception&) {
    throw std::invalid_argument("--inject-fault '" + fault + "': RANK, STEP and START must be integers (" + form + ")");
  }
  return f;
}

// The launcher's account of earlier starts of this job (launch.hpp's --max-restarts).
train::TrainOptions::Restart restart_from_environment() {
  train::TrainOptions::Restart r;
  if (const char* n = std::getenv(launch::kRestartCountEnv)) r.count = std::max(0, std::atoi(n));
  if (const char* why = std::getenv(launch::kRestartReasonEnv)) r.reason = why;
  if (const char* at = std::getenv(launch::kFailedAtMsEnv)) r.failed_at_ms = std::atoll(at);
  return r;
}

// Error lines name pp as --nproc, or as --nproc over the other dimensions.
FlagNames flags_of(const TrainArgs& a, Command c) {
  const bool mesh = a.values.dp * a.model.tensor_parallel.size * a.model.context_parallel.size > 1;
  return schema_flags(c, mesh ? "pp (--nproc / (--tp x --cp x --dp))" : "--nproc");
}

// Turns the parsed flags into the options and task of a job of `world` ranks
// (verify's in float64 whatever --dtype says).
TrainJob resolve(const TrainArgs& a, int world, bool in_float64 = false) {
  TrainJob job;
  train::TrainOptions& o = job.options;
  o = a.train;
  o.dp = a.values.dp;
  // What the loop prints itself, and the banners, name options as train's flags.
  o.name_options = [flags = flags_of(a, kTrain)](const std::string& m) { return with_flags(m, flags); };
  auto& s = o.pipeline.schedule;
  schedule::kind_from_name(a.values.schedule, &s.kind);  // the schema allowed only names of kinds
  const int tp = a.model.tensor_parallel.size, cp = a.model.context_parallel.size;
  if (world % (o.dp * tp * cp) != 0)
    throw std::invalid_argument("--tp " + std::to_string(tp) + " x --cp " + std::to_string(cp) + " x --dp " +
                                std::to_string(o.dp) + " does not divide the job's " + std::to_string(world) +
                                " ranks (--nproc): the ranks are tp x cp x dp x pp; give --nproc a multiple of it");
  s.pp = world / (o.dp * tp * cp);
  apply_mpipe_flags(a.values.mpipe_body, a.values.overflow, a.flags.given(a.train.pipeline.schedule.vpp), s);
  if (s.mpipe.overflow == schedule::Overflow::Auto && s.kind == schedule::ScheduleKind::MPipe)
    choose_train_owners(a, s);
  o.pipeline.executor.variable_seq_len = a.data.variable_seq_len;
  // The schema allowed only dtype_names().
  const auto dtype = in_float64 ? model::DType::Float64 : model::dtype_from_name(a.values.dtype);
  if (!a.values.fault.empty()) o.fault = fault_from_flag(a.values.fault);
  o.restart = restart_from_environment();
  // A restarted job resumes from the newest checkpoint its --save holds (else
  // from --load's, or from step 1).
  if (o.restart.count > 0 && !o.save.empty() && train::latest_checkpoint(o.save)) o.load = o.save;
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

int train_rank(const TrainArgs& a, comm::ProcessGroup* pg) {
  const int world = pg ? pg->world_size() : 1;
  const TrainJob job = resolve(a, world);
  const auto& s = job.options.pipeline.schedule;
  print_blas_line(pg);
  if (!pg || pg->rank() == 0) {
    std::cout << "hyperpipe train: " << a.values.schedule << " pp=" << s.pp << " vpp=" << s.vpp << " mb=" << s.micro_batches;
    if (s.placement() == schedule::Placement::V) std::cout << " placement=v";
    if (s.kind == schedule::ScheduleKind::MPipe && s.mpipe.body != schedule::ScheduleKind::Interleaved)
      std::cout << " body=" << schedule::kind_name(s.mpipe.body);
    if (s.kind == schedule::ScheduleKind::MPipe && s.mpipe.overflow == schedule::Overflow::Auto)
      std::cout << " overflow=auto (owners " << schedule::format_owners(s.mpipe.owners) << ")";
    const comm::MeshShape mesh = job_mesh(job);
    if (mesh.dp > 1) std::cout << " dp=" << mesh.dp;
    if (mesh.tp > 1) std::cout << " tp=" << mesh.tp;
    if (mesh.cp > 1) std::cout << " cp=" << mesh.cp;
    std::cout << " | " << job.options.name_options(job.task->describe()) << std::endl;
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
  try {
    train::train(job.options, *job.task, pg);
  } catch (const train::SaveFailed& e) {
    // The job ends here: a restart would meet the same disk.
    std::cerr << "hyperpipe train: error: " << with_flags(e.what(), flags_of(a, kTrain)) << std::endl;
    return launch::kExitNoRestart;
  }
  return 0;
}

// One step of the job's layout against one process, in double precision
// (train::verify); rank 0 prints the loss and every gradient's error, the
// worst first. Exits 1 past the tolerance.
int verify_rank(const TrainArgs& a, comm::ProcessGroup* pg) {
  const double tolerance = a.values.tolerance;
  const TrainJob job = resolve(a, pg ? pg->world_size() : 1, /*in_float64=*/true);
  const train::VerifyReport r = train::verify(job.options, *job.task, pg);
  const bool ok = r.worst() <= tolerance;
  if (!pg || pg->rank() == 0) {
    const comm::MeshShape mesh = job_mesh(job);
    std::cout << "hyperpipe verify: " << a.values.schedule << " pp=" << job.options.pipeline.schedule.pp
              << " vpp=" << job.options.pipeline.schedule.vpp << " mb=" << job.options.pipeline.schedule.micro_batches
              << " dp=" << mesh.dp << " tp=" << mesh.tp << " cp=" << mesh.cp
              << " against one process, float64 | " << job.options.name_options(job.task->describe()) << "\n";
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

}  // namespace

void add_train_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "Train a GPT with pipeline parallelism (default: PP=4 interleaved, embedded corpus)");
  a->flags = add_schema_options(cmd, kTrain, a->roots());
  cmd->callback([a, exit_code] {
    a->job.nproc_given = a->flags.given(a->job.nproc);
    a->model.emulate = emulate_from_flag(a->values.emulate_layer_ms, a->model.emulate);
    *exit_code = run_job_reporting(
        "train", flags_of(*a, kTrain), a->job, [a](int world) { resolve(*a, world); },
        [a](comm::ProcessGroup* pg) { return train_rank(*a, pg); });
  });
}

void add_verify_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("verify",
                                 "Check one step of a training layout (train's flags) against one process, in float64:"
                                 " the loss and every gradient by name");
  a->flags = add_schema_options(cmd, kVerify, a->roots());
  cmd->callback([a, exit_code] {
    a->job.nproc_given = a->flags.given(a->job.nproc);
    a->model.emulate = emulate_from_flag(a->values.emulate_layer_ms, a->model.emulate);
    *exit_code = run_job_reporting(
        "verify", flags_of(*a, kVerify), a->job, [a](int world) { resolve(*a, world, /*in_float64=*/true); },
        [a](comm::ProcessGroup* pg) { return verify_rank(*a, pg); });
  });
}

}  // namespace hp::cli
