// bench's check of the advisor (bench/advisor_check.hpp) and the spread of
// repeated timings (bench/spread.hpp).
#include <gtest/gtest.h>

#include "bench/advisor_check.hpp"
#include "bench/spread.hpp"
#include "model/transformer_config.hpp"
#include "schedule/advise.hpp"

namespace {

using namespace hp;

TEST(AdvisorCheck, SaysWhyItCannotBeAsked) {
  schedule::ModelProfile p;
  model::EmulatedLayer none, emulated{2, 4, false};
  std::string why;
  schedule::ScheduleOptions s;
  s.pp = 2;
  const std::vector<bench::MeasuredLayout> one{{"1f1b v1", s, 10}};
  EXPECT_FALSE(bench::check_advisor(p, none, true, 2, 4, one, &why));
  EXPECT_EQ(why, "it needs each layer's cost: give model.emulate");
  EXPECT_FALSE(bench::check_advisor(p, emulated, false, 2, 4, one, &why));
  EXPECT_EQ(why, "it splits the layers evenly: drop model.layers_per_stage");
  EXPECT_FALSE(bench::check_advisor(p, emulated, true, 1, 4, one, &why));
  EXPECT_EQ(why, "there is no pipeline to lay out");
}

TEST(AdvisorCheck, RanksTheMeasuredLayoutsAndNamesThoseItDoesNotConsider) {
  schedule::ModelProfile p;
  p.layers = 8;
  p.layer_f = 2, p.layer_b = 4;
  schedule::ScheduleOptions one_f_one_b, gpipe;
  one_f_one_b.kind = schedule::ScheduleKind::OneFOneB;
  gpipe.kind = schedule::ScheduleKind::GPipe;
  for (auto* s : {&one_f_one_b, &gpipe}) s->pp = 2, s->micro_batches = 4;
  std::string why;
  const auto check = bench::check_advisor(p, {2, 4, false}, true, 2, 4,
                                          {{"1f1b v1", one_f_one_b, 10}, {"gpipe v1", gpipe, 9}}, &why);
  ASSERT_TRUE(check) << why;
  EXPECT_EQ(check->first_measured, "1f1b v1");
  EXPECT_EQ(check->measured_fastest, "1f1b v1");  // of its candidates: GPipe is none
  EXPECT_EQ(check->not_candidates, (std::vector<std::string>{"gpipe v1"}));
  EXPECT_TRUE(check->agrees());
}

TEST(Spread, TheMedianIgnoresOneOutlierAndTheRangeShowsIt) {
  EXPECT_EQ(bench::median({3, 1, 2}), 2);
  EXPECT_EQ(bench::median({4, 1, 3, 2}), 2.5);
  const bench::Spread s = bench::spread({1, 1, 100, 1});
  EXPECT_EQ(s.median, 1);
  EXPECT_EQ(s.low, 1);
  EXPECT_EQ(s.high, 100);
}

}  // namespace
