// The measured trace of a step (train/measured_trace.hpp) written by one
// process (no group): the Chrome trace holds every event on rank 0's track,
// timed from the step's first event; the timeline draws the measured step
// (each action from when its input was there) and, with simulate, below it
// the step simulated from the measured costs (waits excluded); a timeline of
// another layout than the job's ranks, and a file that cannot be written, are
// refused by name. (Several ranks' traces gathered on rank 0 are checked end
// to end in tests/cli/train_trace_dist_test.cpp.)
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/action_trace.hpp"
#include "schedule/schedule.hpp"
#include "train/measured_trace.hpp"

namespace hp::train {
namespace {

using runtime::ActionTrace;
using runtime::TraceEvent;
using schedule::Action;
using schedule::ActionType;

std::string measured_trace_file(const std::string& name) {
  return ::testing::TempDir() + "hp_measured_trace_" + std::to_string(::getpid()) + "_" + name;
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A compute event that waited `waited` µs for its input at its start.
TraceEvent compute(const std::string& name, Action a, double start, double end, double waited = 0) {
  TraceEvent e{name, "compute", a, start, end};
  e.waited_us = waited;
  e.ready_us = start + waited;
  return e;
}

schedule::ScheduleOptions one_rank(int micro_batches) {
  schedule::ScheduleOptions o;
  o.kind = schedule::ScheduleKind::NoPipelining;
  o.pp = 1;
  o.vpp = 1;
  o.micro_batches = micro_batches;
  return o;
}

// One rank's step of no-pipelining over 2 micro-batches, in µs from the
// recorder's origin: F0 1 ms, B0 2 ms, F1 1 ms after waiting 0.5 ms for its
// input (a wait event inside it), B1 2 ms. Measured: a step of 6.5 ms, 0.5 ms
// of it idle (7.7%); simulated from the costs without the wait: F 1 ms,
// B 2 ms, a step of 6 ms with no bubble.
ActionTrace one_rank_step() {
  ActionTrace t;
  t.add(compute("0F0", {ActionType::FWD, 0, 0, -1}, 0, 1000));
  t.add(compute("0B0", {ActionType::BWD, 0, 0, -1}, 1000, 3000));
  t.add(compute("0F1", {ActionType::FWD, 0, 1, -1}, 3000, 4500, 500));
  t.add({"wait its input", "wait", {ActionType::FWD, 0, 1, -1}, 3000, 3500, 4096});
  t.add(compute("0B1", {ActionType::BWD, 0, 1, -1}, 4500, 6500));
  return t;
}

TEST(MeasuredTrace, TheChromeTraceHoldsEveryEventOnRankZerosTrackTimedFromTheStepsFirstEvent) {
  EXPECT_EQ(clock_offset_us(nullptr), 0);
  ActionTrace t;
  const Action f{ActionType::FWD, 0, 0, -1}, send{ActionType::SEND_F, 0, 0, 1};
  t.add(compute("0F0", f, 5000, 6000, 100));
  t.add({"wait Activation(stage 0, micro 0)", "wait", f, 5000, 5100, 4096});
  t.add({"SEND_F 0->1 (0)", "post", send, 6000, 6010, 2048});
  t.add({"the step's last sends", "wait", Action{}, 6010, 6500, 0});
  TraceOutputs out;
  out.chrome = measured_trace_file("chrome.json");
  std::remove(out.chrome.c_str());
  write_measured_trace(t, 123.0, nullptr, one_rank(1), out);
  const auto trace = nlohmann::json::parse(text_of(out.chrome));
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  const auto& events = trace.at("traceEvents");
  ASSERT_EQ(events.size(), 5u) << trace.dump(1);
  EXPECT_EQ(events[0].at("ph"), "M");
  EXPECT_EQ(events[0].at("name"), "thread_name");
  EXPECT_EQ(events[0].at("tid"), 0);
  EXPECT_EQ(events[0].at("args").at("name"), "rank 0");
  struct Want {
    std::string name, cat;
    double ts, dur;
    int bytes;  // -1: no args (compute)
  };
  const Want want[] = {{"0F0", "compute", 0, 1000, -1},
                       {"wait Activation(stage 0, micro 0)", "wait", 0, 100, 4096},
                       {"SEND_F 0->1 (0)", "post", 1000, 10, 2048},
                       {"the step's last sends", "wait", 1010, 490, 0}};
  for (int i = 0; i < 4; ++i) {
    const auto& e = events[i + 1];
    SCOPED_TRACE(e.dump());
    EXPECT_EQ(e.at("name"), want[i].name);
    EXPECT_EQ(e.at("cat"), want[i].cat);
    EXPECT_EQ(e.at("ph"), "X");
    EXPECT_EQ(e.at("pid"), 0);
    EXPECT_EQ(e.at("tid"), 0);
    EXPECT_NEAR(e.at("ts").get<double>(), want[i].ts, 1e-3);
    EXPECT_NEAR(e.at("dur").get<double>(), want[i].dur, 1e-3);
    if (want[i].bytes < 0)
      EXPECT_FALSE(e.contains("args"));
    else
      EXPECT_EQ(e.at("args").at("bytes"), want[i].bytes);
  }
}

TEST(MeasuredTrace, TheTimelineDrawsTheMeasuredStepAndBelowItTheStepSimulatedFromTheMeasuredCosts) {
  const ActionTrace t = one_rank_step();
  TraceOutputs measured_only;
  measured_only.timeline = measured_trace_file("measured.svg");
  write_measured_trace(t, 0, nullptr, one_rank(2), measured_only);
  const std::string alone = text_of(measured_only.timeline);
  EXPECT_NE(alone.find("no-pipelining pp=1 v=1 mb=2 | step 6.5 ms | bubble 7.7%"), std::string::npos) << alone;
  EXPECT_EQ(alone.find(">measured<"), std::string::npos) << alone;
  EXPECT_EQ(alone.find("simulated"), std::string::npos) << alone;

  TraceOutputs both;
  both.timeline = measured_trace_file("both.svg");
  both.simulate = true;
  write_measured_trace(t, 0, nullptr, one_rank(2), both);
  const std::string svg = text_of(both.timeline);
  const auto measured = svg.find(">measured<"), simulated = svg.find(">simulated with the measured per-stage costs<");
  ASSERT_NE(measured, std::string::npos) << svg;
  ASSERT_NE(simulated, std::string::npos) << svg;
  EXPECT_LT(measured, simulated) << "the measured step is drawn above the simulated one";
  const auto measured_title = svg.find("no-pipelining pp=1 v=1 mb=2 | step 6.5 ms | bubble 7.7%", measured);
  const auto simulated_title = svg.find("no-pipelining pp=1 v=1 mb=2 | step 6 ms | bubble 0%", simulated);
  EXPECT_LT(measured_title, simulated) << svg;
  EXPECT_NE(simulated_title, std::string::npos) << svg;
  EXPECT_EQ(svg.rfind("<svg xmlns=", 0), 0u) << "one picture holding both";
}

TEST(MeasuredTrace, ATimelineOfAnotherLayoutAndAFileThatCannotBeWrittenAreRefusedByName) {
  const ActionTrace t = one_rank_step();
  schedule::ScheduleOptions two_ranks = one_rank(2);
  two_ranks.kind = schedule::ScheduleKind::OneFOneB;
  two_ranks.pp = 2;
  TraceOutputs timeline;
  timeline.timeline = measured_trace_file("two.svg");
  try {
    write_measured_trace(t, 0, nullptr, two_ranks, timeline);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "train.trace.timeline draws one pipeline: the job's 1 ranks are not its 2 stages' ranks");
  }
  TraceOutputs unwritable;
  unwritable.chrome = measured_trace_file("no_such_dir") + "/t.json";
  try {
    write_measured_trace(t, 0, nullptr, one_rank(2), unwritable);
    ADD_FAILURE() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "train.trace.chrome " + unwritable.chrome + ": cannot write the file");
  }
}

}  // namespace
}  // namespace hp::train
