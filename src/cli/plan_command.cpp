#include "cli/plan_command.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "cli/option_flags.hpp"
#include "cli/option_schema.hpp"
#include "comm/mesh_layout.hpp"
#include "schedule/advise.hpp"
#include "schedule/generate.hpp"
#include "schedule/owner_search.hpp"
#include "schedule/render.hpp"
#include "schedule/schedule_io.hpp"
#include "schedule/simulate.hpp"
#include "schedule/validate.hpp"

namespace hp::cli {
namespace {

// What plan reads from the command line (option_schema.hpp).
struct PlanArgs {
  CommandValues values;
  schedule::ScheduleOptions opts;
  schedule::CostModel costs;
  schedule::ModelProfile profile;  // --advise: the model; --layers, comm costs and --frozen-preprocess are shared
  RegisteredFlags flags;
  std::string auto_note;  // --overflow auto: the owners chosen, printed with the text grid

  OptionRoots roots() {
    OptionRoots r;
    r.values = &values;
    r.schedule = &opts;
    r.costs = &costs;
    r.profile = &profile;
    return r;
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--from-csv " + path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& flag, const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::invalid_argument(flag + " " + path + ": cannot write the file");
}

void parse_stage_costs(PlanArgs& a) {
  for (const auto& spec : a.values.stage_costs) {
    schedule::StageCost c;
    int stage = -1;
    char c1 = 0, c2 = 0;
    std::istringstream in(spec);
    bool ok = (in >> stage >> c1 >> c.f >> c2 >> c.b) && c1 == ':' && c2 == ':' && stage >= 0 && c.f >= 0 && c.b >= 0;
    // Optionally the split backward's parts: STAGE:F:B:I:W.
    if (ok && !in.eof()) {
      char c3 = 0, c4 = 0;
      ok = (in >> c3 >> c.i >> c4 >> c.w) && c3 == ':' && c4 == ':' && c.i >= 0 && c.w >= 0;
    }
    if (!ok || !in.eof())
      throw std::invalid_argument("--stage-cost '" + spec + "': expected STAGE:F:B or STAGE:F:B:I:W with STAGE >= 0 "
                                  "and the costs >= 0 (e.g. 0:1.5:3 or 0:1.5:3:1.5:1.5)");
    a.costs.per_stage[stage] = c;
  }
}

// The schedule itself as JSON: its layout and one token list per rank.
std::string schedule_json(const schedule::Schedule& s) {
  nlohmann::json j;
  j["schedule"] = std::string(schedule::kind_name(s.options.kind));
  j["pp"] = s.options.pp;
  j["vpp"] = s.options.vpp;
  j["mb"] = s.options.micro_batches;
  j["forward_only"] = s.options.forward_only;
  if (s.options.kind == schedule::ScheduleKind::MPipe) j["mpipe_body"] = std::string(schedule::kind_name(s.options.mpipe.body));
  j["ranks"] = nlohmann::json::array();
  for (const auto& rank : s.ranks) {
    auto& tokens = j["ranks"].emplace_back(nlohmann::json::array());
    for (const std::string& token : schedule::format_actions(rank)) tokens.push_back(token);
  }
  return j.dump();
}

schedule::Schedule build(PlanArgs& a) {
  if (!a.values.from_csv.empty()) {
    schedule::Schedule s;
    try {
      s = schedule::from_csv(read_file(a.values.from_csv));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--from-csv " + a.values.from_csv + ": " + e.what());
    }
    return s;
  }
  schedule::kind_from_name(a.values.schedule, &a.opts.kind);  // the schema allowed only names of kinds
  apply_mpipe_flags(a.values.mpipe_body, a.values.overflow, a.flags.given(a.opts.vpp), a.opts);
  if (a.opts.mpipe.overflow == schedule::Overflow::Auto && a.opts.kind == schedule::ScheduleKind::MPipe) {
    const schedule::OwnerChoice c = schedule::choose_owners(a.opts, a.costs);
    a.opts.mpipe.owners = c.owners;
    std::ostringstream os;
    os << "overflow auto: owners " << schedule::format_owners(c.owners) << " (0i: rank 0 inline); simulated step " << c.step_time << ", full " << c.full_step << ", min "
       << c.min_step << " (" << c.evaluations << " schedules simulated)";
    a.auto_note = os.str();
  }
  return schedule::generate(a.opts);
}

// The job's ranks as `hyperpipe train --dp` lays them out.
void print_mesh(const PlanArgs& a, const schedule::Schedule& s) {
  comm::MeshShape mesh;
  mesh.dp = a.values.dp;
  mesh.pp = s.options.pp;
  std::cout << "mesh: " << comm::describe_mesh(mesh) << " (ranks above are stage ranks of each pipeline)\n";
  for (comm::MeshDim d : {comm::MeshDim::PP, comm::MeshDim::DP})
    for (const auto& line : comm::describe_mesh_groups(mesh, d)) std::cout << "  " << line << "\n";
}

// --advise: every candidate layout of the model ranked by simulated step time.
void run_advise(PlanArgs& a) {
  schedule::ModelProfile& m = a.profile;
  m.layers = a.opts.layers;
  m.frozen_preprocess = a.opts.mpipe.frozen_preprocess;
  m.p2p_latency = a.costs.p2p_latency;
  m.p2p_bw = a.costs.p2p_bw;
  m.broadcast_bw = a.costs.broadcast_bw;
  m.activation_bytes = a.costs.activation_bytes;
  m.input_bytes = a.costs.preprocess_input_bytes;
  a.costs.validate();
  const schedule::Advice advice = schedule::advise(m, a.opts.pp, a.opts.micro_batches);
  const auto& best = advice.ranked.front();
  if (a.values.format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& c : advice.ranked)
      j.push_back({{"layout", c.name},
                   {"step_time", c.step_time},
                   {"bubble_fraction", c.bubble_fraction},
                   {"peak_layer_activations", c.peak_layer_activations},
                   {"broadcast_time", c.broadcast_time},
                   {"preprocess_backward_time", c.recompute_time}});
    std::cout << nlohmann::json{{"ranked", j}, {"skipped", advice.skipped}}.dump() << "\n";
    return;
  }
  std::printf("%-4s %-36s %10s %8s %8s %8s\n", "#", "layout", "step", "vs best", "bubble", "peak");
  const int shown = std::min<int>(a.values.advise_top, static_cast<int>(advice.ranked.size()));
  for (int i = 0; i < shown; ++i) {
    const auto& c = advice.ranked[i];
    std::printf("%-4d %-36s %10.3f %7.1f%% %7.1f%% %8.0f\n", i + 1, c.name.c_str(), c.step_time,
                100 * (c.step_time / best.step_time - 1), 100 * c.bubble_fraction, c.peak_layer_activations);
  }
  if (shown < static_cast<int>(advice.ranked.size()))
    std::cout << "(" << advice.ranked.size() - shown << " more; --advise-top N shows more)\n";
  std::cout << "peak: stored micro-batch activations x layers per chunk, on the rank that holds most\n"
            << schedule::explain(advice);
  if (!advice.skipped.empty())
    std::cout << "not candidates: " << advice.skipped.size() << " layouts, e.g. " << advice.skipped.front() << "\n";
  std::cout << std::flush;
}

void run_plan(PlanArgs& a) {
  if (a.values.advise) return run_advise(a);
  parse_stage_costs(a);
  schedule::Schedule s = build(a);
  for (const auto& [stage, cost] : a.costs.per_stage)
    if (stage >= s.num_stages())
      throw std::invalid_argument("--stage-cost: stage " + std::to_string(stage) + " is beyond the schedule's " +
                                  std::to_string(s.num_stages()) + " stages (0.." + std::to_string(s.num_stages() - 1) +
                                  ")");
  if (auto v = schedule::validate(s); !v.ok()) {
    // The first issue on the error's own line, the others after it.
    std::string report = v.to_string();
    while (!report.empty() && report.back() == '\n') report.pop_back();
    const std::size_t eol = report.find('\n');
    const std::size_t more = v.issues.size() - 1;
    throw std::invalid_argument("the schedule is invalid: " + report.substr(0, eol) +
                                (more ? " (and " + std::to_string(more) + " more issue" + (more > 1 ? "s" : "") +
                                            " below)" + report.substr(eol)
                                      : ""));
  }
  if (a.values.compute_only) s = schedule::filter(s, schedule::is_compute);

  const bool need_sim = a.values.simulate || a.values.format == "text" || !a.values.svg.empty() || !a.values.trace.empty();
  schedule::SimulationReport report;
  if (need_sim) report = schedule::simulate(s, a.costs);

  if (a.values.format == "csv") {
    std::cout << schedule::to_csv(s);
  } else if (a.values.format == "actions") {
    std::cout << schedule::to_text(s);
  } else if (a.values.format == "json") {
    std::cout << (a.values.simulate ? schedule::report_json(report) : schedule_json(s)) << "\n";
  } else {
    std::cout << schedule::render_text_grid(s, report);
    if (a.values.simulate) {
      std::cout << "step_time " << report.step_time << "  bubble_fraction " << report.bubble_fraction << "\n";
      for (size_t r = 0; r < report.ranks.size(); ++r)
        std::cout << "rank " << r << ": busy " << report.ranks[r].busy << "  idle " << report.ranks[r].idle
                  << "  peak_activations " << report.ranks[r].peak_activations << "\n";
    }
    if (!a.auto_note.empty()) std::cout << a.auto_note << "\n";
    if (a.values.dp > 1) print_mesh(a, s);
  }
  if (!a.values.svg.empty()) write_file("--svg", a.values.svg, schedule::render_svg(s, report));
  if (!a.values.trace.empty()) write_file("--trace", a.values.trace, schedule::render_chrome_trace(s, report));
}

}  // namespace

void add_plan_command(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "Print, validate, simulate and draw a pipeline schedule");
  args->flags = add_schema_options(cmd, kPlan, args->roots());
  cmd->callback([args, exit_code] {
    try {
      run_plan(*args);
    } catch (const std::exception& e) {
      std::cerr << "hyperpipe plan: error: " << with_flags(e.what(), schema_flags(kPlan)) << "\n";
      *exit_code = 2;
    }
  });
}

}  // namespace hp::cli
