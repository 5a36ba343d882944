#include "cli/option_schema.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "cli/job_options.hpp"
#include "data/tokenize.hpp"
#include "launch/launcher.hpp"
#include "schedule/advise.hpp"
#include "schedule/schedule.hpp"
#include "schedule/schedule_table.hpp"
#include "schedule/simulate.hpp"

namespace hp::cli {
namespace {

#define HP_FIELD HP_OPTION_FIELD
Field no_field(const OptionRoots&) { return std::monostate{}; }
// An option both JobOptions (train, verify, bench, generate) and launch's
// LaunchOptions hold under the same member name: the root the command has.
#define HP_JOB_OR_LAUNCH_FIELD(member) \
  [](const OptionRoots& r) -> Field { return r.job ? Field(&r.job->member) : Field(&r.launch->member); }

constexpr unsigned kJob = kJobCommands, kLayout = kLayoutCommands, kRanks = kRankCommands;

// --schedule's help: every row of the schedule table, its name and line.
std::string schedule_help() {
  std::string help;
  for (const schedule::ScheduleKind k : schedule::schedule_kinds()) {
    const schedule::ScheduleRow& row = schedule::schedule_row(k);
    help += (help.empty() ? "" : "; ") + row.name + ": " + row.help;
  }
  return help;
}

std::vector<OptionSpec> build_schema() {
  return {
      {"config", "--config", kPlan | kRanks | kTokenize, "TOML file whose keys are these flags' names (mb = 8); later flags override it",
       no_field, {}, "", false},
      {"job.nproc", "--nproc", kRanks | kLaunch,
       "local ranks to start (train, bench: 4; generate: 1); with RANK/WORLD_SIZE set this process is one rank",
       HP_JOB_OR_LAUNCH_FIELD(nproc), at_least(1).at_most(1024), "launch.nproc", false},
      {"launch.nproc_per_node", "--nproc-per-node", kRanks | kLaunch, "torchrun's name for --nproc: ranks on this node",
       HP_JOB_OR_LAUNCH_FIELD(nproc), at_least(1).at_most(1024), "", false},
      {"launch.nnodes", "--nnodes", kRanks | kLaunch,
       "nodes of the job, each started by its own launcher with the same flags but --node-rank",
       HP_JOB_OR_LAUNCH_FIELD(nnodes), at_least(1)},
      {"launch.node_rank", "--node-rank", kRanks | kLaunch, "this node, in [0, --nnodes): its ranks are "
       "node-rank x nproc and up", HP_JOB_OR_LAUNCH_FIELD(node_rank), at_least(0)},
      {"launch.master_addr", "--master-addr", kRanks | kLaunch,
       "node 0's address: with --nnodes its launcher hosts the store there (on that interface alone)",
       HP_JOB_OR_LAUNCH_FIELD(master_addr)},
      {"launch.master_port", "--master-port", kRanks | kLaunch,
       "the store's port on --master-addr (0 = a free one; several nodes must name one)",
       HP_JOB_OR_LAUNCH_FIELD(master_port), at_least(0).at_most(65535)},
      {"launch.max_restarts", "--max-restarts", kTrain | kLaunch,
       "start every rank again after a rank fails, up to N times (train resumes from --save's latest checkpoint; "
       "0: a failed rank ends the job)",
       HP_JOB_OR_LAUNCH_FIELD(max_restarts), at_least(0)},
      {"launch.rendezvous_timeout_s", "--rendezvous-timeout", kRanks | kLaunch,
       "with --nnodes: seconds each launcher waits for the others at every start (a launcher killed may be started "
       "again meanwhile) and at the end",
       HP_JOB_OR_LAUNCH_FIELD(rendezvous_timeout_s), greater_than(0)},
      {"tokenize.inputs", "--input", kTokenize,
       "text files (one document per line) or, with --json-key, JSON lines files", HP_FIELD(r.tokenize->inputs), {}, "",
       false},
      {"tokenize.output_prefix", "--output-prefix", kTokenize,
       "write PREFIX.bin and PREFIX.idx (a Megatron indexed dataset; PREFIX.model when a tokenizer is trained)",
       HP_FIELD(r.tokenize->output_prefix), {}, "", false},
      {"tokenize.json_key", "--json-key", kTokenize, "read JSON lines and take each document from this string field",
       HP_FIELD(r.tokenize->json_key), {}, "", false},
      {"tokenize.tokenizer_model", "--tokenizer-model", kTokenize,
       "encode with this SentencePiece model (default: train one of --vocab-size pieces on the input)",
       HP_FIELD(r.tokenize->tokenizer_model), {}, "data.tokenizer_model", false},
      {"tokenize.vocab_size", "--vocab-size", kTokenize, "pieces of the SentencePiece model trained when none is given",
       HP_FIELD(r.tokenize->vocab_size), at_least(1)},
      {"tokenize.workers", "--workers", kTokenize, "encoding threads (0 = the machine's cores)",
       HP_FIELD(r.tokenize->workers), at_least(0)},
      {"schedule.kind", "--schedule", kPlan | kJob, schedule_help(), HP_FIELD(r.values->schedule),
       one_of(schedule::kind_names_and_aliases)},
      {"schedule.pp", "--pp", kPlan, "pipeline ranks", HP_FIELD(r.schedule->pp), at_least(1)},
      {"mesh.dp", "--dp", kLayout,
       "data-parallel replicas of the pipeline: pp = ranks / (tp x cp x dp), a step reads dp x --mb micro-batches "
       "(plan prints the mesh)",
       HP_FIELD(r.values->dp), at_least(1), "train.dp"},
      {"schedule.vpp", "--vpp", kLayout | kGenerate,
       "model chunks (virtual stages) per rank (default: the schedule's, 2 for interleaved, mpipe, zbv and dualpipev, else 1)",
       HP_FIELD(r.schedule->vpp), at_least(1), "", false},
      {"schedule.micro_batches", "--mb", kLayout, "micro-batches per step", HP_FIELD(r.schedule->micro_batches),
       at_least(1)},
      {"schedule.group_size", "--group-size", kPlan | kJob,
       "micro-batch group size per virtual stage (0 = PP, or the smallest working size above it; MB when MB < PP)",
       HP_FIELD(r.schedule->group_size), at_least(0)},
      {"schedule.layers", "--layers", kPlan, "model layers, split evenly over pp*vpp chunks (0 = unchecked)",
       HP_FIELD(r.schedule->layers), at_least(0), "profile.layers"},
      {"schedule.mpipe.transpose_layers", "--transpose-layers", kLayout, "MPipe T: layers of stage 0 to transpose",
       HP_FIELD(r.schedule->mpipe.transpose_layers), at_least(0)},
      {"schedule.mpipe.overflow", "--overflow", kLayout,
       "MPipe overflow: full, min, or auto (owners that minimise the simulated step; plan and train)",
       HP_FIELD(r.values->overflow), one_of(schedule::overflow_name_list)},
      {"schedule.mpipe.body", "--mpipe-body", kPlan | kJob,
       "MPipe: the pipeline it transposes around: interleaved (the spec's), 1f1b or gpipe (one chunk per rank), "
       "zb1p, zbv or dualpipev",
       HP_FIELD(r.values->mpipe_body), one_of(schedule::mpipe_body_name_list)},
      {"schedule.mpipe.owner_backward", "--owner-backward", kLayout, "MPipe: owners run the preprocess backward",
       HP_FIELD(r.schedule->mpipe.owner_backward)},
      {"schedule.mpipe.frozen_preprocess", "--frozen-preprocess", kPlan,
       "MPipe: the preprocess has no trainable parameter", HP_FIELD(r.schedule->mpipe.frozen_preprocess)},
      {"schedule.forward_only", "--forward-only", kPlan,
       "forwards only (evaluation, generation): no backward, no gradient messages", HP_FIELD(r.schedule->forward_only)},

      // plan's outputs and its cost model
      {"plan.compute_only", "--compute-only", kPlan, "drop every action that is not a compute (F, B, I, W)",
       HP_FIELD(r.values->compute_only)},
      {"plan.format", "--format", kPlan, "what to print", HP_FIELD(r.values->format),
       one_of({"text", "csv", "json", "actions"})},
      {"plan.from_csv", "--from-csv", kPlan, "read the schedule from a CSV file instead of generating it",
       HP_FIELD(r.values->from_csv)},
      {"plan.simulate", "--simulate", kPlan, "run the cost model and report step time, bubble and activations",
       HP_FIELD(r.values->simulate)},
      {"costs.f", "--cost-f", kPlan, "forward time of one stage for one micro-batch", HP_FIELD(r.costs->f),
       at_least(0)},
      {"costs.b", "--cost-b", kPlan, "backward time of one stage for one micro-batch", HP_FIELD(r.costs->b),
       at_least(0)},
      {"costs.i", "--cost-i", kPlan, "input part of a split backward (zb1p's I); < 0 = half of --cost-b",
       HP_FIELD(r.costs->i)},
      {"costs.w", "--cost-w", kPlan, "weight part of a split backward (zb1p's W); < 0 = half of --cost-b",
       HP_FIELD(r.costs->w)},
      {"costs.per_stage", "--stage-cost", kPlan, "per-stage override STAGE:F:B or STAGE:F:B:I:W (repeatable)",
       HP_FIELD(r.values->stage_costs)},
      {"costs.pre_f", "--cost-pre-f", kPlan, "preprocess forward time (part of stage 0 outside MPipe)",
       HP_FIELD(r.costs->pre_f), at_least(0)},
      {"costs.pre_b", "--cost-pre-b", kPlan, "preprocess backward time", HP_FIELD(r.costs->pre_b), at_least(0)},
      {"costs.recompute", "--cost-recompute", kPlan, "preprocess recompute time in MPIPE_TRANSPOSE_BWD (<0 = pre-f)",
       HP_FIELD(r.costs->recompute)},
      {"costs.broadcast_bytes", "--broadcast-bytes", kPlan, "preprocess parameter bytes broadcast per step",
       HP_FIELD(r.costs->broadcast_bytes), at_least(0)},
      {"costs.broadcast_bw", "--broadcast-bw", kPlan, "broadcast bandwidth, bytes per time unit (0 = infinite)",
       HP_FIELD(r.costs->broadcast_bw), at_least(0), "profile.broadcast_bw"},
      {"costs.p2p_latency", "--p2p-latency", kPlan, "point-to-point latency", HP_FIELD(r.costs->p2p_latency),
       at_least(0),
       "profile.p2p_latency"},
      {"costs.p2p_bw", "--p2p-bw", kPlan, "point-to-point bandwidth, bytes per time unit (0 = infinite)",
       HP_FIELD(r.costs->p2p_bw), at_least(0), "profile.p2p_bw"},
      {"costs.activation_bytes", "--activation-bytes", kPlan, "bytes of one activation or gradient message",
       HP_FIELD(r.costs->activation_bytes), at_least(0), "profile.activation_bytes"},
      {"costs.preprocess_input_bytes", "--input-bytes", kPlan, "bytes of one MPIPE_GRAPH_SEND (preprocess input)",
       HP_FIELD(r.costs->preprocess_input_bytes), at_least(0), "profile.input_bytes"},
      {"plan.advise", "--advise", kPlan,
       "rank every layout of the model described by --layers and the --layer-*, --embed-*, --tower-* flags "
       "(1F1B, interleaved v, zero-bubble, MPipe v/T/overflow/owner-backward/body) by simulated step time and peak "
       "memory",
       HP_FIELD(r.values->advise)},
      {"plan.advise_top", "--advise-top", kPlan, "--advise: layouts to list", HP_FIELD(r.values->advise_top),
       at_least(1)},
      {"profile.layer_f", "--layer-f", kPlan, "--advise: forward time of one body layer, one micro-batch",
       HP_FIELD(r.profile->layer_f), at_least(0)},
      {"profile.layer_b", "--layer-b", kPlan, "--advise: backward time of one body layer", HP_FIELD(r.profile->layer_b),
       at_least(0)},
      {"profile.layer_bytes", "--layer-bytes", kPlan,
       "--advise: parameter bytes of one body layer (broadcast when transposed)", HP_FIELD(r.profile->layer_bytes),
       at_least(0)},
      {"profile.embed_f", "--embed-f", kPlan, "--advise: forward time of the embedding (VL: patch embedding + projector)",
       HP_FIELD(r.profile->embed_f), at_least(0)},
      {"profile.embed_b", "--embed-b", kPlan, "--advise: backward time of the embedding", HP_FIELD(r.profile->embed_b),
       at_least(0)},
      {"profile.embed_bytes", "--embed-bytes", kPlan, "--advise: parameter bytes of the embedding",
       HP_FIELD(r.profile->embed_bytes), at_least(0)},
      {"profile.tower_layers", "--tower-layers", kPlan,
       "--advise: vision tower blocks before the body (VL; T counts them)", HP_FIELD(r.profile->tower_layers),
       at_least(0)},
      {"profile.tower_f", "--tower-f", kPlan, "--advise: forward time of one tower block", HP_FIELD(r.profile->tower_f),
       at_least(0)},
      {"profile.tower_b", "--tower-b", kPlan, "--advise: backward time of one tower block", HP_FIELD(r.profile->tower_b),
       at_least(0)},
      {"profile.tower_bytes", "--tower-bytes", kPlan, "--advise: parameter bytes of one tower block",
       HP_FIELD(r.profile->tower_bytes), at_least(0)},
      {"plan.svg", "--svg", kPlan, "write an SVG timeline", HP_FIELD(r.values->svg), {}, "", false},
      {"plan.trace", "--trace", kPlan, "write a Chrome trace JSON (Perfetto, chrome://tracing)",
       HP_FIELD(r.values->trace), {}, "", false},

      {"job.timeout_s", "--timeout", kRanks, "seconds before a silent peer is declared dead", HP_FIELD(r.job->timeout_s),
       greater_than(0).at_most(604800)},
  };
}

#undef HP_FIELD

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

CommandValues::CommandValues()
    : schedule(schedule::kind_name(schedule::ScheduleOptions{}.kind)),
      overflow(schedule::overflow_name(schedule::MPipeOptions{}.overflow)),
      mpipe_body(schedule::kind_name(schedule::MPipeOptions{}.body)) {}

namespace {

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string joined(const std::vector<std::string>& names, const char* sep) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : sep) + n;
  return out;
}

}  // namespace

std::vector<std::string> ValueRule::allowed() const { return names_of ? names_of() : names; }

std::string ValueRule::describe() const {
  switch (kind) {
    case Kind::Any: return "";
    case Kind::OneOf: return "{" + joined(allowed(), ",") + "}";
    case Kind::Custom: return form;
    case Kind::Range:
      if (has_low && has_high)
        return std::string("in ") + (low_open ? "(" : "[") + number_text(low) + ", " + number_text(high) +
               (high_open ? ")" : "]");
      return (low_open ? "> " : ">= ") + number_text(low);
  }
  return "";
}

std::string ValueRule::check(const std::string& value) const {
  switch (kind) {
    case Kind::Any: return "";
    case Kind::Custom: return custom(value);
    case Kind::OneOf: {
      const auto all = allowed();
      if (std::find(all.begin(), all.end(), value) != all.end()) return "";
      return "must be one of " + joined(all, ", ") + ", got '" + value + "'";
    }
    case Kind::Range: {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      const bool number = !value.empty() && end == value.c_str() + value.size() && std::isfinite(v);
      const bool above = !has_low || (low_open ? v > low : v >= low);
      const bool below = !has_high || (high_open ? v < high : v <= high);
      if (number && above && below) return "";
      return std::string("must be ") + (number ? "" : "a number ") + describe() + ", got '" + value + "'";
    }
  }
  return "";
}

ValueRule one_of(std::vector<std::string> names) {
  ValueRule r;
  r.kind = ValueRule::Kind::OneOf;
  r.names = std::move(names);
  return r;
}

ValueRule one_of(std::vector<std::string> (*names)()) {
  ValueRule r;
  r.kind = ValueRule::Kind::OneOf;
  r.names_of = names;
  return r;
}

ValueRule at_least(double low) {
  ValueRule r;
  r.kind = ValueRule::Kind::Range;
  r.low = low;
  r.has_low = true;
  return r;
}

ValueRule greater_than(double low) {
  ValueRule r = at_least(low);
  r.low_open = true;
  return r;
}

ValueRule ValueRule::at_most(double h) const {
  ValueRule r = *this;
  r.high = h;
  r.has_high = true;
  r.high_open = false;
  return r;
}

ValueRule ValueRule::below(double h) const {
  ValueRule r = at_most(h);
  r.high_open = true;
  return r;
}

ValueRule custom(std::string (*check)(const std::string& value), const char* form) {
  ValueRule r;
  r.kind = ValueRule::Kind::Custom;
  r.custom = check;
  r.form = form;
  return r;
}

const char* command_name(Command c) {
  switch (c) {
    case kPlan: return "plan";
    case kTrain: return "train";
    case kVerify: return "verify";
    case kBench: return "bench";
    case kGenerate: return "generate";
    case kLaunch: return "launch";
    case kTokenize: return "tokenize";
    case kCheckpoint: return "checkpoint";  // its export subcommand's flags
  }
  return "?";
}

const std::vector<OptionSpec>& option_schema() {
  // Help lines list the schedules and model families: the table is built
  // again after one was registered. Earlier tables stay, since the commands'
  // validators point into the table they were registered from.
  static std::deque<std::vector<OptionSpec>> tables;
  static std::pair<std::size_t, std::size_t> built_for;  // (schedules, families) the last table lists
  std::pair<std::size_t, std::size_t> registered{schedule::schedule_kinds().size(), 0};
#ifdef HYPERPIPE_WITH_TORCH
  registered.second = model_registry_size();
#endif
  if (tables.empty() || built_for != registered) {
    std::vector<OptionSpec> all = build_schema();
#ifdef HYPERPIPE_WITH_TORCH
    for (OptionSpec& o : model_options()) all.push_back(std::move(o));
#endif
    tables.push_back(std::move(all));
    built_for = registered;
  }
  return tables.back();
}

bool RegisteredFlags::given_field(const void* field) const {
  const auto it = by_field.find(field);
  if (it == by_field.end()) throw std::logic_error("RegisteredFlags::given: the command registered no option for this field");
  for (const CLI::Option* o : it->second)
    if (o->count() > 0) return true;
  return false;
}

RegisteredFlags add_schema_options(CLI::App* cmd, Command c, const OptionRoots& roots) {
  RegisteredFlags added;
  std::map<std::string, CLI::Option*> by_flag;  // for `needs`
  for (const OptionSpec& o : option_schema()) {
    if (!(o.commands & c)) continue;
    const void* target = nullptr;
    CLI::Option* opt = std::visit(
        [&](auto field) -> CLI::Option* {
          using P = decltype(field);
          if constexpr (std::is_same_v<P, std::monostate>) {
            return cmd->add_option(o.flag, o.help);
          } else if constexpr (std::is_same_v<P, bool*>) {
            target = field;
            return cmd->add_flag(o.flag, *field, o.help);
          } else {
            target = field;
            CLI::Option* opt = cmd->add_option(o.flag, *field, o.help);
            if constexpr (std::is_same_v<P, std::vector<std::string>*>)
              opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
            else if (o.show_default)
              opt->capture_default_str();
            return opt;
          }
        },
        o.field(roots));
    if (*o.needs) opt->needs(by_flag.at(o.needs));
    if (o.rule.kind != ValueRule::Kind::Any) {
      const ValueRule* rule = &o.rule;  // the schema is static
      opt->check(CLI::Validator([rule](std::string& v) { return rule->check(v); }, rule->describe(), ""));
    }
    by_flag[o.flag] = opt;
    if (target) added.by_field[target].push_back(opt);
  }
  return added;
}

FlagNames schema_flags(Command c, const std::string& pp_flag) {
  FlagNames f;
  bool has_pp = false;
  for (const OptionSpec& o : option_schema()) {
    if (!(o.commands & c) || std::string(o.flag) == "--config") continue;
    f.emplace_back(o.name, o.flag);
    has_pp |= std::string(o.name) == "schedule.pp";
    for (const auto& alias : split_names(o.aliases)) f.emplace_back(alias, o.flag);
  }
  if (!has_pp) f.emplace_back("schedule.pp", pp_flag);
  longest_first(f);
  return f;
}

}  // namespace hp::cli
