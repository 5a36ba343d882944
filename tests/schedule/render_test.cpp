#include "schedule/render.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "schedule/generate.hpp"
#include "schedule/schedule_io.hpp"

namespace hp::schedule {
namespace {

using nlohmann::json;

struct Timed {
  const char* token;
  double start;
  double end;
};

// A schedule and its report written out by hand, so these tests do not
// depend on generate() or simulate().
struct Fixture {
  Schedule schedule;
  SimulationReport report;
};

Fixture make(const std::vector<std::vector<Timed>>& ranks, double step_time) {
  Fixture f;
  f.report.step_time = step_time;
  double idle = 0;
  for (const auto& rank : ranks) {
    std::vector<Action> actions;
    RankReport rr;
    for (const Timed& t : rank) {
      std::string error;
      auto a = parse_action(t.token, &error);
      EXPECT_TRUE(a.has_value()) << error;
      actions.push_back(*a);
      rr.timeline.push_back({*a, t.start, t.end});
      if (is_compute(a->type) || a->type == ActionType::MPIPE_TRANSPOSE_FWD ||
          a->type == ActionType::MPIPE_TRANSPOSE_BWD || is_collective(a->type))
        rr.busy += t.end - t.start;
    }
    rr.idle = step_time - rr.busy;
    idle += rr.idle;
    f.schedule.ranks.push_back(actions);
    f.report.ranks.push_back(rr);
  }
  f.report.bubble_fraction = idle / (ranks.size() * step_time);
  infer_options(f.schedule);
  return f;
}

// PP=2 1F1B, MB=2, F=1, B=2, free comm: step (MB + PP - 1)(F + B) = 9. A
// receive spans the wait for its data, as a simulator may report it.
Fixture one_f_one_b() {
  Fixture f = make(
      {
          {{"0F0", 0, 1}, {"0SEND_F0@1", 1, 1}, {"0F1", 1, 2}, {"0SEND_F1@1", 2, 2}, {"0RECV_B0@1", 2, 4},
           {"0B0", 4, 6}, {"0RECV_B1@1", 6, 7}, {"0B1", 7, 9}},
          {{"1RECV_F0@0", 0, 1}, {"1F0", 1, 2}, {"1B0", 2, 4}, {"1SEND_B0@0", 4, 4}, {"1RECV_F1@0", 4, 4},
           {"1F1", 4, 5}, {"1B1", 5, 7}, {"1SEND_B1@0", 7, 7}},
      },
      9);
  f.report.ranks[0].peak_activations = 2;
  f.report.ranks[1].peak_activations = 1;
  return f;
}

// PP=2 MPipe, MB=2, pre_f = 1, recompute + backward 1, broadcast 1.
Fixture mpipe() {
  return make(
      {
          {{"0MPIPE_PARAM_BROADCAST", 0, 1}, {"0MPIPE_TRANSPOSE_FWD0", 1, 2}, {"0MPIPE_FWD_RECV1@1", 2, 2},
           {"0MPIPE_GRAPH_RECV1@1", 2, 2}, {"0F0", 2, 3}, {"0SEND_F0@1", 3, 3}, {"0F1", 3, 4},
           {"0SEND_F1@1", 4, 4}, {"0RECV_B0@1", 4, 6}, {"0B0", 6, 8}, {"0MPIPE_TRANSPOSE_BWD0", 8, 9},
           {"0RECV_B1@1", 9, 9}, {"0B1", 9, 11}, {"0MPIPE_TRANSPOSE_BWD1", 11, 12}},
          {{"0MPIPE_PARAM_BROADCAST", 0, 1}, {"0MPIPE_TRANSPOSE_FWD1", 1, 2}, {"0MPIPE_FWD_SEND1@0", 2, 2},
           {"0MPIPE_GRAPH_SEND1@0", 2, 2}, {"1RECV_F0@0", 2, 3}, {"1F0", 3, 4}, {"1B0", 4, 6},
           {"1SEND_B0@0", 6, 6}, {"1RECV_F1@0", 6, 6}, {"1F1", 6, 7}, {"1B1", 7, 9}, {"1SEND_B1@0", 9, 9}},
      },
      12);
}

int count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Every start tag has its end tag, in order; comments, declarations and
// self-closing tags excepted. Returns "" or what went wrong.
std::string xml_balance_error(const std::string& x) {
  std::vector<std::string> open;
  for (size_t p = x.find('<'); p != std::string::npos; p = x.find('<', p + 1)) {
    const size_t e = x.find('>', p);
    if (e == std::string::npos) return "unterminated tag at " + std::to_string(p);
    const std::string tag = x.substr(p + 1, e - p - 1);
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;
    if (tag.find('<') != std::string::npos) return "'<' inside a tag at " + std::to_string(p);
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "unexpected </" + name + "> at " + std::to_string(p);
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \t\n")));
    }
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

TEST(RenderGrid, OneRowPerRankAndACellPerSlot) {
  const Fixture f = one_f_one_b();
  const std::string g = render_text_grid(f.schedule, f.report);
  const auto lines = lines_of(g);
  ASSERT_GE(lines.size(), 6u) << g;
  EXPECT_NE(lines[0].find("1f1b pp=2 v=1 mb=2"), std::string::npos) << g;
  EXPECT_NE(lines[0].find("step 9 ms"), std::string::npos) << g;
  EXPECT_NE(lines[0].find("bubble 33.3%"), std::string::npos) << g;
  EXPECT_EQ(lines[1], "1 slot = 1 ms");
  EXPECT_EQ(lines[2], "slot    0  1  2  3  4  5  6  7  8");
  EXPECT_EQ(lines[3], "rank 0  F0 F1 .  .  B0 B0 .  B1 B1");
  EXPECT_EQ(lines[4], "rank 1  .  F0 B0 B0 F1 B1 B1 .  .");
  EXPECT_EQ(lines[5].rfind("legend:", 0), 0u) << g;
  EXPECT_EQ(lines.size(), 6u) << g;
}

TEST(RenderGrid, SlotIsTheShortestComputeAndBoxesKeepTheirLength) {
  // F = 2, B = 4: one slot is 2 ms, a backward covers two cells.
  Fixture f = make({{{"0F0", 0, 2}, {"0B0", 2, 6}, {"0F1", 6, 8}, {"0B1", 8, 12}}}, 12);
  const auto lines = lines_of(render_text_grid(f.schedule, f.report));
  EXPECT_EQ(lines[1], "1 slot = 2 ms");
  EXPECT_EQ(lines[3], "rank 0  F0 B0 B0 F1 B1 B1");
}

TEST(RenderGrid, ChunkShownWhenInterleaved) {
  Fixture f = make({{{"0F0", 0, 1}, {"1F0", 1, 2}, {"1B0", 2, 4}, {"0B0", 4, 6}}}, 6);
  ASSERT_EQ(f.schedule.options.vpp, 2);
  const auto lines = lines_of(render_text_grid(f.schedule, f.report));
  EXPECT_EQ(lines[3], "rank 0  F0.0 F0.1 B0.1 B0.1 B0.0 B0.0");
  EXPECT_NE(lines.back().find("chunk c"), std::string::npos);
}

TEST(RenderGrid, MPipeStepsHaveTheirOwnLabels) {
  const Fixture f = mpipe();
  const auto lines = lines_of(render_text_grid(f.schedule, f.report));
  EXPECT_EQ(lines[3], "rank 0  BC T0 F0 F1 .  .  B0 B0 R0 B1 B1 R1");
  EXPECT_EQ(lines[4], "rank 1  BC T1 .  F0 B0 B0 F1 B1 B1 .  .  .");
  const std::string& legend = lines.back();
  for (const char* l : {"BC=", "Tm=", "Rm=", "Fm=", "Bm="}) EXPECT_NE(legend.find(l), std::string::npos) << l;
  EXPECT_EQ(legend.find("GR="), std::string::npos) << "only kinds that appear are explained";
}

TEST(RenderGrid, WideTimelinesAreTruncatedWithANote) {
  Fixture f = make({{{"0F0", 0, 1}, {"0B0", 1, 501}}}, 501);
  const std::string g = render_text_grid(f.schedule, f.report);
  EXPECT_NE(g.find("truncated: 501 slots, showing the first 400"), std::string::npos) << g.substr(0, 200);
  const auto lines = lines_of(g);
  EXPECT_EQ(count(lines[3], "B0"), 399);
}

// Free compute (all costs zero) leaves nothing to draw; every renderer still
// produces a valid picture rather than dividing by zero.
TEST(RenderGrid, NothingToDraw) {
  Fixture f = make({{{"0F0", 0, 0}, {"0B0", 0, 0}}}, 0);
  f.report.bubble_fraction = 0;
  EXPECT_NE(render_text_grid(f.schedule, f.report).find("no compute actions"), std::string::npos);
  const std::string svg = render_svg(f.schedule, f.report);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_EQ(count(svg, "<rect class=\"action\""), 0);
  const json trace = json::parse(render_chrome_trace(f.schedule, f.report));
  int instants = 0;
  for (const json& e : trace.at("traceEvents")) instants += e.at("ph") == "i";
  EXPECT_EQ(instants, 2);
}

TEST(RenderGrid, ReportMustMatchSchedule) {
  Fixture f = one_f_one_b();
  f.report.ranks.pop_back();
  const std::string why = "simulation report has " + std::to_string(f.report.ranks.size()) +
                          " rank timelines but the schedule has " + std::to_string(f.schedule.ranks.size()) +
                          " ranks; render the report of this schedule";
  for (const auto& render : {render_text_grid, render_svg, render_chrome_trace}) {
    try {
      render(f.schedule, f.report);
      ADD_FAILURE() << "a report of another schedule was rendered";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(e.what(), why);
    }
  }
}

TEST(RenderTrace, TracksSpansAndInstants) {
  const Fixture f = one_f_one_b();
  const json doc = json::parse(render_chrome_trace(f.schedule, f.report));
  EXPECT_EQ(doc.at("displayTimeUnit"), "ms");
  int thread_names = 0, spans = 0, instants = 0;
  std::vector<bool> named(2, false);
  for (const json& e : doc.at("traceEvents")) {
    EXPECT_EQ(e.at("pid"), 0);
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name") {
      ++thread_names;
      const int tid = e.at("tid");
      EXPECT_EQ(e.at("args").at("name"), "rank " + std::to_string(tid));
      named[tid] = true;
    } else if (ph == "X") {
      ++spans;
      const std::string name = e.at("name");
      const std::string cat = e.at("cat");
      EXPECT_TRUE(cat == "forward" || cat == "backward" || cat == "recv") << name << " " << cat;
    } else if (ph == "i") {
      ++instants;
      EXPECT_EQ(e.at("s"), "t");
    }
  }
  EXPECT_EQ(thread_names, 2);
  EXPECT_TRUE(named[0] && named[1]);
  // 8 compute spans plus the three receives that waited; the rest are instants.
  EXPECT_EQ(spans, 8 + 3);
  EXPECT_EQ(instants, 16 - spans);
}

TEST(RenderTrace, TimesInMicrosecondsAndArgs) {
  const Fixture f = one_f_one_b();
  const json doc = json::parse(render_chrome_trace(f.schedule, f.report));
  bool saw_b0 = false, saw_send = false;
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M") continue;
    if (e.at("name") == "0B0") {
      saw_b0 = true;
      EXPECT_EQ(e.at("tid"), 0);
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 4000.0);
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 2000.0);
      EXPECT_EQ(e.at("cat"), "backward");
      EXPECT_EQ(e.at("args").at("stage"), 0);
      EXPECT_EQ(e.at("args").at("micro"), 0);
      EXPECT_FALSE(e.at("args").contains("peer"));
    }
    if (e.at("name") == "1SEND_B0@0") {
      saw_send = true;
      EXPECT_EQ(e.at("cat"), "send");
      EXPECT_EQ(e.at("ph"), "i");
      EXPECT_EQ(e.at("args").at("peer"), 0);
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 4000.0);
    }
  }
  EXPECT_TRUE(saw_b0);
  EXPECT_TRUE(saw_send);
}

TEST(RenderTrace, MPipeCategories) {
  const Fixture f = mpipe();
  const json doc = json::parse(render_chrome_trace(f.schedule, f.report));
  for (const json& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M") continue;
    const std::string name = e.at("name");
    std::string want;
    if (name == "0MPIPE_PARAM_BROADCAST") want = "collective";
    if (name == "0MPIPE_TRANSPOSE_FWD0" || name == "0MPIPE_TRANSPOSE_BWD1") want = "mpipe";
    if (name == "0MPIPE_FWD_SEND1@0") want = "send";
    if (!want.empty()) {
      EXPECT_EQ(e.at("cat"), want) << name;
    }
  }
}

TEST(RenderSvg, WellFormedWithOneBoxPerComputeAction) {
  const Fixture f = one_f_one_b();
  const std::string svg = render_svg(f.schedule, f.report);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_EQ(count(svg, "<rect class=\"action\""), 8);
  EXPECT_EQ(count(svg, "<rect class=\"idle\""), 2);
  EXPECT_EQ(count(svg, "<line class=\"send\""), 4);
  // Micro numbers centred in the boxes: 4 boxes of micro 0, 4 of micro 1.
  EXPECT_EQ(count(svg, "text-anchor=\"middle\" fill=\"#ffffff\">0</text>"), 4);
  EXPECT_EQ(count(svg, "text-anchor=\"middle\" fill=\"#ffffff\">1</text>"), 4);
  EXPECT_NE(svg.find("1f1b pp=2 v=1 mb=2 | step 9 ms | bubble 33.3%"), std::string::npos);
  EXPECT_NE(svg.find(">forward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">backward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">idle</text>"), std::string::npos);
}

TEST(RenderSvg, MPipeStepsAreDistinct) {
  const Fixture f = mpipe();
  const std::string svg = render_svg(f.schedule, f.report);
  EXPECT_EQ(xml_balance_error(svg), "");
  // 8 body boxes, 2 broadcasts, 2 transposed forwards, 2 recompute backwards.
  EXPECT_EQ(count(svg, "<rect class=\"action\""), 14);
  EXPECT_EQ(count(svg, "<rect class=\"hatch\""), 4);
  EXPECT_NE(svg.find(">transpose forward</text>"), std::string::npos);
  EXPECT_NE(svg.find(">transpose backward (recompute)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">param broadcast</text>"), std::string::npos);
  EXPECT_NE(svg.find("mpipe pp=2 v=1 mb=2 T=1 overflow=full"), std::string::npos);
}

TEST(RenderSvg, ChunksGetTheirOwnShade) {
  Fixture f = make({{{"0F0", 0, 1}, {"1F0", 1, 2}, {"1B0", 2, 4}, {"0B0", 4, 6}}}, 6);
  const std::string svg = render_svg(f.schedule, f.report);
  EXPECT_EQ(xml_balance_error(svg), "");
  EXPECT_NE(svg.find(">forward chunk 0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">forward chunk 1</text>"), std::string::npos);
  // Four boxes, four different fills.
  std::vector<std::string> fills;
  for (size_t p = svg.find("<rect class=\"action\""); p != std::string::npos; p = svg.find("<rect class=\"action\"", p + 1)) {
    const size_t q = svg.find("fill=\"", p) + 6;
    fills.push_back(svg.substr(q, 7));
  }
  ASSERT_EQ(fills.size(), 4u);
  std::sort(fills.begin(), fills.end());
  EXPECT_EQ(std::unique(fills.begin(), fills.end()), fills.end());
}

TEST(RenderReport, JsonSummary) {
  const Fixture f = one_f_one_b();
  const json doc = json::parse(report_json(f.report));
  EXPECT_DOUBLE_EQ(doc.at("step_time").get<double>(), 9.0);
  EXPECT_NEAR(doc.at("bubble_fraction").get<double>(), 1.0 / 3.0, 1e-12);
  ASSERT_EQ(doc.at("ranks").size(), 2u);
  EXPECT_EQ(doc.at("ranks")[0].at("rank"), 0);
  EXPECT_DOUBLE_EQ(doc.at("ranks")[0].at("busy").get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(doc.at("ranks")[0].at("idle").get<double>(), 3.0);
  EXPECT_EQ(doc.at("ranks")[0].at("peak_activations"), 2);
  EXPECT_EQ(doc.at("ranks")[1].at("peak_activations"), 1);
}

// Generated and simulated schedules: every drawn action appears once in each
// picture, whatever the layout.
TEST(RenderGenerated, EveryPictureShowsEveryComputeAction) {
  struct Case {
    ScheduleKind kind;
    int pp, vpp, mb;
    bool owner;
  };
  const Case cases[] = {{ScheduleKind::OneFOneB, 4, 1, 8, false},
                        {ScheduleKind::Interleaved, 4, 2, 8, false},
                        {ScheduleKind::MPipe, 4, 1, 8, false},
                        {ScheduleKind::MPipe, 4, 2, 6, true},
                        {ScheduleKind::GPipe, 3, 1, 5, false}};
  CostModel costs;
  costs.pre_f = 0.5;
  costs.pre_b = 0.5;
  costs.broadcast_bytes = 1;
  costs.broadcast_bw = 4;
  for (const Case& c : cases) {
    ScheduleOptions o;
    o.kind = c.kind;
    o.pp = c.pp;
    o.vpp = c.vpp;
    o.micro_batches = c.mb;
    o.mpipe.owner_backward = c.owner;
    SCOPED_TRACE(std::string(kind_name(c.kind)) + " pp=" + std::to_string(c.pp) + " v=" + std::to_string(c.vpp));
    const Schedule s = generate(o);
    const SimulationReport r = simulate(s, costs);
    int drawn = 0, actions = 0;
    for (const RankReport& rr : r.ranks) {
      for (const TimedAction& t : rr.timeline) {
        ++actions;
        const bool compute_like = is_compute(t.action.type) || t.action.type == ActionType::MPIPE_TRANSPOSE_FWD ||
                                  t.action.type == ActionType::MPIPE_TRANSPOSE_BWD ||
                                  t.action.type == ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD ||
                                  is_collective(t.action.type);
        if (compute_like && t.end > t.start) ++drawn;
      }
    }
    const std::string svg = render_svg(s, r);
    EXPECT_EQ(xml_balance_error(svg), "");
    EXPECT_EQ(count(svg, "<rect class=\"action\""), drawn);

    const json trace = json::parse(render_chrome_trace(s, r));
    int spans = 0, events = 0;
    for (const json& e : trace.at("traceEvents")) {
      if (e.at("ph") == "M") continue;
      ++events;
      if (e.at("ph") == "X") ++spans;
    }
    EXPECT_EQ(events, actions);
    EXPECT_EQ(spans, drawn);  // the simulator gives communication no duration

    const auto lines = lines_of(render_text_grid(s, r));
    for (int rank = 0; rank < c.pp; ++rank)
      EXPECT_EQ(lines[3 + rank].rfind("rank " + std::to_string(rank), 0), 0u) << lines[3 + rank];
  }
}

// The textbook 1F1B picture: (MB + PP - 1)(F + B) slots of F = 1.
TEST(RenderGenerated, OneFOneBGridHasTheTextbookWidth) {
  ScheduleOptions o;
  o.kind = ScheduleKind::OneFOneB;
  o.pp = 4;
  o.vpp = 1;
  o.micro_batches = 8;
  const Schedule s = generate(o);
  const auto lines = lines_of(render_text_grid(s, simulate(s, CostModel{})));
  std::istringstream header(lines[2]);
  std::string word;
  header >> word;
  EXPECT_EQ(word, "slot");
  int slots = 0;
  while (header >> word) EXPECT_EQ(word, std::to_string(slots++));
  EXPECT_EQ(slots, 33);
  // Rank 3 (no warmup) is busy from slot 3 to slot 26 without a gap.
  EXPECT_EQ(lines[6].substr(8, 9), ".  .  .  ");
  EXPECT_EQ(count(lines[6], "."), 3 + 6);
}

}  // namespace
}  // namespace hp::schedule
