// A schedule added from this file alone, a generator and a row of the
// schedule table (schedule/schedule_table.hpp), as a user's program would add
// one: plan generates, validates, simulates and ranks it, refuses what its
// row refuses in one line naming the flag, and --help lists it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "in_process.hpp"
#include "schedule/schedule_table.hpp"

namespace hp::testing {
namespace {

using schedule::Action;
using schedule::ActionType;

// GPipe with its backwards last in, first out: every forward, then the
// backwards from the last micro-batch down, on every rank. The last stage's
// first backward is the last forward's, so rank PP-1 starts its backwards
// without waiting for a message, and every rank walks the same order.
schedule::ComputeOrder lifo_order(const schedule::ScheduleOptions& o) {
  schedule::ComputeOrder out(o.pp);
  for (int r = 0; r < o.pp; ++r) {
    for (int m = 0; m < o.micro_batches; ++m) out[r].push_back(Action{ActionType::FWD, r, m, -1});
    for (int m = o.micro_batches - 1; m >= 0; --m) out[r].push_back(Action{ActionType::BWD, r, m, -1});
  }
  return out;
}

schedule::ScheduleKind lifo() {
  static const schedule::ScheduleKind kind = [] {
    schedule::ScheduleRow row;
    row.name = "gpipe-lifo";
    row.aliases = {"lifo"};
    row.help = "GPipe, its backwards last in, first out";
    row.order = lifo_order;
    row.theory_bubble = [](const schedule::ScheduleOptions& o, const schedule::StageCost&) -> std::optional<double> {
      return static_cast<double>(o.pp - 1) / o.micro_batches;
    };
    return schedule::register_schedule(row);
  }();
  return kind;
}

TEST(ScheduleRow, AScheduleAddedByARowIsPlannedValidatedSimulatedAndRanked) {
  lifo();
  // Planned, validated (plan refuses an invalid schedule) and simulated: GPipe's
  // step and bubble at the textbook costs, (MB + PP - 1)(F + B).
  const auto planned = run_in_process("plan --schedule gpipe-lifo --pp 4 --mb 8 --format json");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  const auto json = nlohmann::json::parse(planned.output.substr(planned.output.find('{')));
  EXPECT_EQ(json.at("schedule"), "gpipe-lifo") << planned.output;
  const auto& last = json.at("ranks").at(3);
  const auto first_backward =
      std::find_if(last.begin(), last.end(), [](const auto& a) { return a.template get<std::string>()[1] == 'B'; });
  ASSERT_NE(first_backward, last.end()) << planned.output;
  EXPECT_EQ(*first_backward, "3B7") << planned.output;  // the last forward's backward first
  const auto simulated = run_in_process("plan --schedule gpipe-lifo --pp 4 --mb 8 --simulate --format json");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.output;
  const auto report = nlohmann::json::parse(simulated.output.substr(simulated.output.find('{')));
  EXPECT_DOUBLE_EQ(report.at("step_time").get<double>(), (8 + 4 - 1) * (1 + 2)) << simulated.output;
  // Its alias is a name of the same row; the text grid draws its order.
  const auto grid = run_in_process("plan --schedule lifo --pp 2 --mb 3");
  ASSERT_EQ(grid.exit_code, 0) << grid.output;
  EXPECT_NE(grid.output.find("gpipe-lifo pp=2 v=1 mb=3"), std::string::npos) << grid.output;
  EXPECT_NE(grid.output.find("B2 B2 B1 B1 B0 B0"), std::string::npos) << grid.output;
  // One chunk per rank, as its row says: the vpp rule refuses 2 naming the flag.
  const auto refused = run_in_process("plan --schedule gpipe-lifo --pp 2 --vpp 2");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--schedule gpipe-lifo runs one chunk per rank: use --vpp 1"), std::string::npos)
      << refused.output;
  // The advisor ranks it with the rest
  const auto advised = run_in_process("plan --advise --pp 4 --mb 8 --layers 8 --layer-f 1 --layer-b 2 --advise-top 200");
  ASSERT_EQ(advised.exit_code, 0) << advised.output;
  // (one chunk per rank: named alone), and MPipe around it as around every body.
  EXPECT_TRUE(std::regex_search(advised.output, std::regex("\n[0-9]+ +gpipe-lifo +[0-9]"))) << advised.output;
  EXPECT_NE(advised.output.find("mpipe body=gpipe-lifo T=0 full"), std::string::npos) << advised.output;
}

TEST(ScheduleRow, HelpListsItAndTheNameRuleTakesIt) {
  lifo();
  const auto help = run_in_process("train --help");
  EXPECT_NE(help.output.find("gpipe-lifo: GPipe, its backwards last in, first out"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find(",dualpipev,gpipe-lifo,lifo}"), std::string::npos) << help.output;
  const auto unknown = run_in_process("plan --schedule lifo2");
  EXPECT_NE(unknown.output.find("must be one of no-pipelining, gpipe, 1f1b, interleaved, mpipe, zb1p, zbv, dualpipev, "
                                "gpipe-lifo, lifo, got 'lifo2'"),
            std::string::npos)
      << unknown.output;
  // A name taken is refused at registration.
  schedule::ScheduleRow again;
  again.name = "zb1p-copy";
  again.aliases = {"lifo"};
  again.order = lifo_order;
  try {
    schedule::register_schedule(again);
    ADD_FAILURE() << "a taken alias was registered";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "register_schedule: the name lifo is taken by schedule gpipe-lifo");
  }
}

// The README's list of schedules names every built-in row.
TEST(ScheduleRow, TheReadmeListsEveryBuiltInSchedule) {
  std::ifstream in(std::string(HP_SOURCE_DIR) + "/README.md");
  const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = readme.find("\nSchedules: ");
  ASSERT_NE(at, std::string::npos);
  const std::string list = readme.substr(at, readme.find("\n\n", at) - at);
  for (const schedule::ScheduleKind k : schedule::schedule_kinds())
    if (k <= schedule::ScheduleKind::DualPipeV)  // the built-in rows; gpipe-lifo is this file's
      EXPECT_NE(list.find("`" + schedule::schedule_row(k).name + "`"), std::string::npos)
          << schedule::schedule_row(k).name << " is missing from the README's Schedules paragraph";
}

}  // namespace
}  // namespace hp::testing
