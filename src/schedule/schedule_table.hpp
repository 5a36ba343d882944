// The schedule table: one row per schedule, everything the house needs of it
// beside its generator (PyTorch's get_schedule_class, grown to the rest):
// names, the chunks per rank it runs, its placement, whether it splits the
// backward, its refusals, the textbook bubble where a formula holds, and
// whether the advisor, bench and MPipe's --mpipe-body take it. plan, train,
// bench, plan --advise, the option schema's --schedule and --help read it;
// the name parser (kind_from_name) and the vpp rule (check_options,
// default_vpp) are its.
//
// Adding a schedule is one register_schedule() call with a generator and a
// row, before the command line is parsed (tests/schedule/schedule_table_test.cpp
// and tests/cli/schedule_row_test.cpp add one from a test file).
//
// Contract: the built-in rows are there from the start; register_schedule is
// for start-up (main(), a test's set-up), not for threads; rows live for the
// process and the lookups only read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::schedule {

struct StageCost;

// Each rank's compute actions (FWD, BWD, BWD_I, BWD_W) in the order it runs
// them, for the options' pp, vpp and micro-batches; communication is inserted
// around them (generate.hpp).
using ComputeOrder = std::vector<std::vector<Action>>;

struct ScheduleRow {
  std::string name;                  // --schedule's value: "zb1p"
  std::vector<std::string> aliases;  // other names --schedule takes
  std::string help;                  // one line: --help's and the README's list
  // Null only for MPipe, which transposes around a body of its own generator.
  ComputeOrder (*order)(const ScheduleOptions& o) = nullptr;
  // Chunks per rank: the default when --vpp is not given, and the range it
  // runs (max_vpp 0: no bound). A schedule of one chunk per rank is refused a
  // --vpp > 1 with interleaved named; a V schedule anything but 2.
  int default_vpp = 1, min_vpp = 1, max_vpp = 1;
  Placement placement = Placement::Loop;
  bool splits_backward = false;  // runs BWD_I then BWD_W (action.hpp)
  bool grouped = false;          // takes --group-size (Megatron's micro-batch groups per chunk)
  // Refusals beyond the vpp rule: "" when the layout runs, else one line
  // naming the options (schedule.micro_batches, ...) and what would run.
  std::string (*refuse)(const ScheduleOptions& o) = nullptr;
  // The bubble its paper or Megatron states, idle over compute on the busiest
  // rank, from stage 0's costs; nullopt where no formula holds for `o`.
  std::optional<double> (*theory_bubble)(const ScheduleOptions& o, const StageCost& stage0) = nullptr;
  // plan --advise ranks it from this many chunks per rank (0: never; it
  // always ranks 1F1B, the baseline the others are measured against).
  int advised_from_vpp = 1;
  bool mpipe_body = true;  // MPipe transposes around it (--mpipe-body)
  bool pipelined = true;   // false: one rank runs every stage (no-pipelining)

  // Whether it runs v chunks per rank, and whether it runs only one number.
  bool runs_vpp(int v) const { return v >= min_vpp && (max_vpp == 0 || v <= max_vpp); }
  bool fixed_vpp() const { return min_vpp == max_vpp; }
};

// Adds a row and returns its kind. Throws std::invalid_argument when the
// name or an alias is taken, or the row is incomplete (no order, a vpp range
// that excludes its default).
ScheduleKind register_schedule(ScheduleRow row);

// The row of a kind (throws std::out_of_range for a kind never registered).
const ScheduleRow& schedule_row(ScheduleKind kind);
// Every kind, in the table's order (the built-ins, then the registered ones).
std::vector<ScheduleKind> schedule_kinds();

}  // namespace hp::schedule
