#include "cli/bench_command.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/advisor_check.hpp"
#include "bench/comm_bench.hpp"
#include "bench/schedule_bench.hpp"
#include "cli/bench_report.hpp"
#include "cli/emulate_flags.hpp"
#include "cli/family_options.hpp"
#include "cli/job.hpp"
#include "cli/option_flags.hpp"
#include "cli/option_schema.hpp"
#include "comm/process_group.hpp"
#include "family/model_family.hpp"
#include "model/hybrid.hpp"
#include "model/vision_config.hpp"
#include "runtime/tensor_memory.hpp"
#include "train/lm_data.hpp"
#include "train/memory_estimate.hpp"
#include "train/place.hpp"
#include "train/progress.hpp"

namespace hp::cli {
namespace {

// What bench reads from the command line (option_schema.hpp).
struct BenchArgs {
  CommandValues values;
  JobOptions job;
  schedule::ScheduleOptions schedule;  // every row's --mb, --vpp (rows that take any v), MPipe's T and owner backward
  model::TransformerConfig model;      // the GPT, or VL's text body
  model::VisionConfig vision;          // --model vl
  model::HybridConfig hybrid;          // --model hybrid
  train::LmDataOptions data;           // --micro-batch-size, --seq-len
  runtime::ExecutorOptions executor;   // --pseudo-deallocate, as train
  RegisteredFlags flags;

  OptionRoots roots() {
    OptionRoots r;
    r.values = &values;
    r.job = &job;
    r.schedule = &schedule;
    r.model = &model;
    r.vision = &vision;
    r.hybrid = &hybrid;
    r.data = &data;
    r.executor = &executor;
    return r;
  }
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

family::FamilyOptions bench_family_options(const BenchArgs& a) {
  return family_options(a.values, a.model, a.data, a.vision, a.hybrid);
}

// --model's family builds the Task, as train builds it (family/model_family.hpp).
std::unique_ptr<train::Task> bench_task(const BenchArgs& a) {
  return family::find_family(a.values.model).make_task(bench_family_options(a));
}

bench::BenchOptions bench_options(const BenchArgs& a) {
  bench::BenchOptions o;
  o.schedule = a.schedule;
  o.schedule.mpipe.overflow = overflow_from_flag(a.values.overflow);
  if (o.schedule.mpipe.overflow == schedule::Overflow::Auto)
    throw std::invalid_argument("--overflow auto is chosen by plan and train; bench takes full or min");
  o.vpp_given = a.flags.given(a.schedule.vpp);
  o.executor = a.executor;
  o.dp = a.values.dp;
  o.tp = a.model.tensor_parallel.size;
  o.steps = a.values.bench_steps;
  o.layer_forward_ms = a.model.emulate.forward_ms;
  o.profile_ops = a.values.profile_ops > 0;
  return o;
}

// Everything checked before any rank starts.
void validate(const BenchArgs& a, int world) {
  if (split(a.values.schedules).empty())
    throw std::invalid_argument("--schedules names no schedule; give one or more, comma-separated (e.g. 1f1b,zb1p,zbv)");
  const int tp = a.model.tensor_parallel.size;
  if (world % (a.values.dp * tp) != 0)
    throw std::invalid_argument("--tp " + std::to_string(tp) + " x --dp " + std::to_string(a.values.dp) +
                                " does not divide the job's " + std::to_string(world) +
                                " ranks (--nproc): the ranks are tp x dp x pp");
  if (a.values.comm && world < 2)
    throw std::invalid_argument("--comm times messages between ranks: give --nproc 2 or more");
  const bench::BenchOptions o = bench_options(a);
  const auto task = bench_task(a);
  for (const auto& name : split(a.values.schedules)) {
    // A model too large for the machine, refused now (no-pipelining: rank 0 holds it alone).
    const schedule::ScheduleOptions layout = bench::row_options(o, name, world, *task).schedule;
    if (const auto estimate = task->memory_estimate(layout))
      if (const auto available = train::available_memory_bytes())
        train::check_memory_fits(*estimate, layout.pp == 1 ? 1 : world, *available, false);
  }
}

// --profile-ops: every rank's table in turn.
void print_ops_in_turn(const bench::BenchRow& row, comm::ProcessGroup* pg, int top) {
  const int rank = pg ? pg->rank() : 0, world = pg ? pg->world_size() : 1;
  for (int r = 0; r < world; ++r) {
    if (r == rank && !row.ops.empty()) std::cout << format_ops(row, rank, top) << std::flush;
    if (pg) pg->barrier();
  }
}

// The advisor's pick among the measured layouts, on the emulated layer costs.
nlohmann::json check_and_print_advisor(const BenchArgs& a, const std::vector<bench::BenchRow>& rows, int world,
                                       bool mesh) {
  std::vector<bench::MeasuredLayout> layouts;
  for (const auto& r : rows)
    if (r.layout.pp == world && world > 1) layouts.push_back({r.label(), r.layout, r.measured_ms});
  std::string why_not = mesh ? "it lays out one pipeline; --dp and --tp are not in its model" : "";
  const auto advisor =
      mesh ? std::nullopt
           : bench::check_advisor(family::find_family(a.values.model).profile(bench_family_options(a)), a.model.emulate,
                                  a.values.layers_per_stage.empty(), world, a.schedule.micro_batches, layouts, &why_not);
  if (!advisor) {
    std::cout << "advisor: not asked: " << with_flags(why_not, schema_flags(kBench)) << "\n";
    return nullptr;
  }
  std::cout << format_advisor_check(*advisor);
  return {{"first_choice", advisor->first_choice},
          {"first_predicted_ms", advisor->first_predicted},
          {"first_measured", advisor->first_measured},
          {"first_measured_rank", advisor->first_measured_rank},
          {"measured_fastest", advisor->measured_fastest},
          {"agrees", advisor->agrees()}};
}

int bench_rank(const BenchArgs& a, comm::ProcessGroup* pg) {
  runtime::tensor_memory::install();
  print_blas_line(pg);
  const int rank = pg ? pg->rank() : 0;
  const int world = pg ? pg->world_size() : 1, tp = a.model.tensor_parallel.size, pp = world / (a.values.dp * tp);
  const train::Place at = train::make_place(pg, pp, a.values.dp, tp, 1);
  const auto schedules = split(a.values.schedules);
  // One unit per timed step, a line per schedule when not on a terminal.
  train::Progress progress(1, static_cast<std::int64_t>(schedules.size()) * a.values.bench_steps, a.values.bench_steps,
                           train::progress_mode_of_stdout(), std::cout);
  std::int64_t timed = 0;
  const bench::BenchOptions options = bench_options(a);
  const auto task = bench_task(a);
  std::vector<bench::BenchRow> rows;
  for (const auto& name : schedules) {
    rows.push_back(bench::bench_schedule(options, *task, name, at,
                                         [&](const std::string& label) { progress.update(++timed, label + " timed"); }));
    if (options.profile_ops) print_ops_in_turn(rows.back(), pg, a.values.profile_ops);
  }
  const std::vector<bench::CommBenchRow> comm_rows =
      a.values.comm ? bench::bench_comm(*pg, a.values.comm_rounds) : std::vector<bench::CommBenchRow>{};
  if (rank != 0) return 0;
  std::cout << format_rows(rows);
  const nlohmann::json advisor = check_and_print_advisor(a, rows, world, at.mesh.has_value());
  if (a.values.overhead) std::cout << format_overhead(rows);
  nlohmann::json comm = nlohmann::json::array();
  auto spread_json = [](const bench::Spread& s) { return nlohmann::json{{"median", s.median}, {"low", s.low}, {"high", s.high}}; };
  for (const auto& r : comm_rows)
    comm.push_back({{"op", r.op}, {"bytes", r.bytes}, {"hyperpipe_us", r.hyperpipe_us}, {"c10d_us", r.c10d_us},
                    {"ratio", spread_json(r.ratio)}, {"control", spread_json(r.control)}});
  if (!comm_rows.empty()) std::cout << bench::format_comm_rows(comm_rows, a.values.comm_rounds) << std::flush;
  if (!a.values.json.empty()) {
    nlohmann::json results = nlohmann::json::array();
    for (const auto& r : rows) results.push_back(row_json(r));
    const nlohmann::json mesh{{"pp", pp}, {"dp", a.values.dp}, {"tp", tp}};
    std::ofstream(a.values.json) << nlohmann::json{{"mesh", mesh}, {"schedules", results}, {"advisor", advisor}, {"comm", comm}}.dump(2)
                                 << "\n";
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Step time of schedules side by side, measured and simulated");
  a->flags = add_schema_options(cmd, kBench, a->roots());
  cmd->callback([a, exit_code] {
    a->job.nproc_given = a->flags.given(a->job.nproc);
    a->model.emulate = emulate_from_flag(a->values.emulate_layer_ms, a->model.emulate);
    *exit_code = run_job_reporting(
        "bench", schema_flags(kBench), a->job, [a](int world) { validate(*a, world); },
        [a](comm::ProcessGroup* pg) { return bench_rank(*a, pg); });
  });
}

}  // namespace hp::cli
