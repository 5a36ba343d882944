// MPipe's "auto" overflow: explicit owners generate what full and min do when
// they name the same owners; the chosen owners are never worse than either
// mode, strictly better where single-micro moves help, and read back from CSV.
#include <gtest/gtest.h>

#include "hand_schedules.hpp"
#include "schedule/generate.hpp"
#include "schedule/owner_search.hpp"
#include "schedule/schedule_io.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

ScheduleOptions mpipe(int pp, int mb, bool frozen) {
  ScheduleOptions o = testing::layout(ScheduleKind::MPipe, pp, 1, mb);
  o.mpipe.frozen_preprocess = frozen;
  return o;
}

CostModel preprocess_costs(double pre) {
  CostModel c;
  c.pre_f = pre;
  c.pre_b = pre;
  return c;
}

TEST(OwnerSearch, ExplicitOwnersReproduceFullAndMin) {
  for (Overflow mode : {Overflow::Full, Overflow::Min}) {
    ScheduleOptions o = mpipe(4, 9, false);
    o.mpipe.overflow = mode;
    const std::string want = to_text(generate(o));
    ScheduleOptions a = o;
    a.mpipe.overflow = Overflow::Auto;
    for (int m = 0; m < o.micro_batches; ++m)
      a.mpipe.owners.push_back(mpipe_inline_on_rank0(o, m) ? -1 : mpipe_owner(o, m));
    EXPECT_EQ(to_text(generate(a)), want) << overflow_name(mode);
  }
}

TEST(OwnerSearch, NeverWorseThanFullOrMinAndStrictlyBetterWhereTheyDiffer) {
  int strictly_better = 0;
  for (int pp : {3, 4})
    for (int mb : {4, 5, 7, 9, 12})
      for (bool frozen : {false, true})
        for (double pre : {0.5, 3.0}) {
          const ScheduleOptions o = mpipe(pp, mb, frozen);
          const OwnerChoice c = choose_owners(o, preprocess_costs(pre));
          EXPECT_LE(c.step_time, std::min(c.full_step, c.min_step)) << pp << " " << mb;
          strictly_better += c.step_time < std::min(c.full_step, c.min_step);
          // The owners run as they were simulated.
          ScheduleOptions a = o;
          a.mpipe.overflow = Overflow::Auto;
          a.mpipe.owners = c.owners;
          const Schedule s = generate(a);
          EXPECT_TRUE(validate(s).ok());
          EXPECT_DOUBLE_EQ(simulate(s, preprocess_costs(pre)).step_time, c.step_time);
        }
  EXPECT_GT(strictly_better, 3);
  // PP 4, MB 9, a frozen preprocess of 3: round-robin and min both take 45; moving micro 4 inline to
  // rank 0 and keeping the rest round-robin takes 42.
  const OwnerChoice c = choose_owners(mpipe(4, 9, true), preprocess_costs(3));
  EXPECT_EQ(c.full_step, 45);
  EXPECT_EQ(c.min_step, 45);
  EXPECT_EQ(c.step_time, 42);
  EXPECT_EQ(c.owners, (std::vector<int>{0, 1, 2, 3, -1, 1, 2, 3, 0}));
}

TEST(OwnerSearch, ChosenOwnersReadBackFromCsvAndBadOwnersAreRefused) {
  ScheduleOptions o = mpipe(4, 9, true);
  o.mpipe.overflow = Overflow::Auto;
  o.mpipe.owners = {0, 1, 2, 3, -1, 1, 2, 3, 0};
  const Schedule back = from_csv(to_csv(generate(o)));
  EXPECT_EQ(back.options.mpipe.overflow, Overflow::Auto);
  EXPECT_EQ(back.options.mpipe.owners, o.mpipe.owners);
  o.mpipe.owners.pop_back();
  EXPECT_THROW(generate(o), std::invalid_argument);
  o.mpipe.owners = {0, 1, 2, 3, -1, 1, 2, 3, 4};
  try {
    generate(o);
    ADD_FAILURE() << "owner 4 of 4 ranks accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("schedule.mpipe.owners[8] must be a rank in [0, 4) or -1"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hp::schedule
