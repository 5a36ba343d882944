// What `hyperpipe bench` prints and writes of its rows (bench/schedule_bench.hpp):
// the tables rank 0 prints and the rows of --json.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "bench/advisor_check.hpp"
#include "bench/schedule_bench.hpp"

namespace hp::cli {

// The rows side by side (measured, simulated, their ratios to the first row,
// the bubble beside theory's, peaks by rank), the fastest by each, the split
// backward, MPipe's own work, and data and tensor parallelism's share.
std::string format_rows(const std::vector<bench::BenchRow>& rows);

// bench --overhead: each row's step broken down per rank.
std::string format_overhead(const std::vector<bench::BenchRow>& rows);

// bench --profile-ops: one rank's `top` operators of the row's step.
std::string format_ops(const bench::BenchRow& row, int rank, int top);

// Two lines on the advisor's pick beside the measured winner.
std::string format_advisor_check(const bench::AdvisorCheck& check);

// One row of --json's "schedules".
nlohmann::json row_json(const bench::BenchRow& row);

}  // namespace hp::cli
