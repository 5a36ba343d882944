// One row of `hyperpipe bench`: a schedule's step time on a task, measured
// over timed steps and simulated from calibrated costs (bench/calibration.hpp)
// and measured links (bench/mesh_links.hpp), with the ideal step, the bubble
// beside theory's, each rank's peak memory, and what data and tensor
// parallelism and MPipe add, measured beside simulated.
//
// Contract: bench_schedule is collective over the job (`at.world`); every
// rank passes the same options and task. A row is filled on the ranks of
// the first pipeline; "no-pipelining" in a job of several ranks is the
// single-process reference: rank 0 runs the whole model alone while the
// others wait, and only rank 0's row is filled.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/step_breakdown.hpp"
#include "runtime/pipeline.hpp"
#include "schedule/schedule.hpp"
#include "schedule/simulate.hpp"
#include "train/op_profile.hpp"
#include "train/place.hpp"
#include "train/task.hpp"

namespace hp::bench {

// What every row shares.
struct BenchOptions {
  // Every row's micro-batches, MPipe's T, overflow (full or min) and owner
  // backward (other schedules ignore those); where vpp_given its vpp applies
  // to the rows whose schedule (MPipe: body) runs more than one number of
  // chunks per rank (interleaved, zb1p), every other row takes its
  // schedule's default.
  schedule::ScheduleOptions schedule;
  bool vpp_given = false;
  runtime::ExecutorOptions executor;
  int dp = 1, tp = 1;     // the mesh around each pipeline
  int steps = 10;         // timed steps per row
  int calibration_reps = 5;
  double layer_forward_ms = 0;  // an emulated layer's forward (the tp link is timed after its share)
  bool profile_ops = false;     // profile one step's operators on every rank
};

// A schedule entry of bench.schedules: a schedule's name, or "mpipe/BODY"
// for MPipe around another body than the interleaved one ("mpipe"), as
// the pipeline of a job of `world` ranks runs it; validated against the
// task. Throws std::invalid_argument naming bench.schedules.
runtime::PipelineOptions row_options(const BenchOptions& o, const std::string& name, int world, const train::Task& task);

// A row's name as bench prints it: "1f1b v1", "mpipe/1f1b v1".
std::string row_label(const std::string& schedule, int vpp);

struct MeasuredAndSimulated {
  double measured = 0, simulated = 0;
};

struct DataParallelRow {
  int dp = 1;
  MeasuredAndSimulated no_sync_ms;  // one replica's step without the gradient averaging
  double grad_bytes = 0;            // this rank's gradients
  double latency_ms = 0, bytes_per_ms = 0;
};

// Rank 0's tensor-parallel all-reduces in one step.
struct TensorParallelRow {
  int tp = 1;
  MeasuredAndSimulated calls, bytes, ms;
  double latency_ms = 0, bytes_per_ms = 0;
};

struct BenchRow {
  std::string schedule;              // the bench.schedules entry
  schedule::ScheduleOptions layout;  // as the pipeline ran it
  bool filled = false;               // false on the ranks that did not run it
  double measured_ms = 0, simulated_ms = 0, simulated_bubble = 0;
  double ideal_ms = 0;                 // the busiest rank's calibrated compute: a step with no bubble
  std::optional<double> theory_bubble;  // Megatron's or ZB-H1's bubble over the ideal step
  std::vector<double> peak_bytes;       // by pipeline rank
  std::optional<schedule::StageCost> stage0;  // split layouts: stage 0's calibrated b, i, w
  double preprocess_f = 0, preprocess_b = 0;
  std::optional<MPipeWork> mpipe_measured, mpipe_simulated;  // rank 0's, MPipe rows
  std::optional<DataParallelRow> data_parallel;
  std::optional<TensorParallelRow> tensor_parallel;
  std::vector<StepBreakdown> traced;    // one traced step, by pipeline rank
  std::vector<train::OpTime> ops;       // this rank's, with BenchOptions::profile_ops

  std::string label() const { return row_label(schedule, layout.vpp); }
  // The measured step beyond the busiest rank's calibrated compute, over
  // that compute: it also counts what a compute action costs in the step
  // beyond the stage alone (the runtime around it, a busier machine).
  double bubble_over_ideal() const { return measured_ms / ideal_ms - 1; }
  // The bubble itself: the time the busiest rank does not compute in the
  // traced step, over the time it does (both measured in that step).
  double bubble_in_step() const;
};

// Runs the row `name`: a warm-up step, o.steps timed steps (after each,
// on_step(label) on rank 0), then the calibration and the simulation.
BenchRow bench_schedule(const BenchOptions& o, const train::Task& task, const std::string& name, const train::Place& at,
                        const std::function<void(const std::string& label)>& on_step);

}  // namespace hp::bench
