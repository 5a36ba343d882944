#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "train/lr_schedule.hpp"

namespace hp::train {
namespace {

LrScheduleOptions opts() {
  LrScheduleOptions o;
  o.max_lr = 1e-3;
  o.min_lr = 1e-5;
  o.warmup_steps = 10;
  o.decay_steps = 110;
  return o;
}

TEST(LrSchedule, LinearWarmup) {
  const auto o = opts();
  EXPECT_DOUBLE_EQ(lr_at(o, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(o, 1), 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(o, 5), 5e-4);
  EXPECT_DOUBLE_EQ(lr_at(o, 10), 1e-3);  // end of warmup = max_lr
  auto w = o;
  w.warmup_init_lr = 2e-4;
  EXPECT_DOUBLE_EQ(lr_at(w, 0), 2e-4);
  EXPECT_DOUBLE_EQ(lr_at(w, 5), 6e-4);
}

TEST(LrSchedule, CosineDecayToMinLr) {
  const auto o = opts();
  // Midpoint of the decay: halfway between max and min.
  EXPECT_NEAR(lr_at(o, 60), 0.5 * (1e-3 + 1e-5), 1e-18);
  // A quarter in: min + (max-min) * (1 + cos(pi/4)) / 2.
  EXPECT_NEAR(lr_at(o, 35), 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(M_PI / 4)), 1e-18);
  EXPECT_DOUBLE_EQ(lr_at(o, 110), 1e-5);
  EXPECT_DOUBLE_EQ(lr_at(o, 1000), 1e-5);
  for (int s = 10; s < 110; ++s) EXPECT_GT(lr_at(o, s), lr_at(o, s + 1)) << s;  // strictly decreasing
}

TEST(LrSchedule, NoWarmup) {
  LrScheduleOptions o;
  o.max_lr = 1.0;
  o.min_lr = 0.0;
  o.warmup_steps = 0;
  o.decay_steps = 4;
  EXPECT_DOUBLE_EQ(lr_at(o, 0), 1.0);
  EXPECT_NEAR(lr_at(o, 2), 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(lr_at(o, 4), 0.0);
  o.decay_steps = 10;
  o.warmup_steps = 10;  // all warmup: max_lr at its end, then min_lr
  EXPECT_DOUBLE_EQ(lr_at(o, 10), 1.0);
  EXPECT_DOUBLE_EQ(lr_at(o, 11), 0.0);
}

TEST(LrSchedule, RejectsBadOptionsNamingTheFlag) {
  auto expect_msg = [](LrScheduleOptions o, std::int64_t s, const std::string& needle) {
    try {
      lr_at(o, s);
      ADD_FAILURE() << "expected an error mentioning " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto o = opts();
  o.max_lr = 0;
  expect_msg(o, 0, "train.lr.max_lr");
  o = opts();
  o.min_lr = 2e-3;
  expect_msg(o, 0, "train.lr.min_lr");
  o = opts();
  o.warmup_steps = -1;
  expect_msg(o, 0, "train.lr.warmup_steps");
  o = opts();
  o.decay_steps = 5;
  expect_msg(o, 0, "train.lr.warmup_steps (10) must be <= train.lr.decay_steps (5)");
  o = opts();
  o.decay_steps = 0;
  o.warmup_steps = 0;
  expect_msg(o, 0, "train.lr.decay_steps");
  expect_msg(opts(), -1, "step must be >= 0");
}

}  // namespace
}  // namespace hp::train
