// Executor: one rank's action list walked without a process group (one rank
// holding every stage), against plain autograd on the same computation.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "runtime/executor.hpp"
#include "runtime/stage.hpp"
#include "schedule/action.hpp"

namespace hp::runtime {
namespace {

using schedule::Action;
using schedule::ActionType;

std::vector<Action> actions(const std::string& text) {
  std::vector<Action> out;
  std::stringstream in(text);
  std::string token;
  while (in >> token) out.push_back(*schedule::parse_action(token));
  return out;
}

schedule::ScheduleOptions one_rank(int vpp, int mb) {
  schedule::ScheduleOptions s;
  s.kind = schedule::ScheduleKind::Interleaved;
  s.pp = 1;
  s.vpp = vpp;
  s.micro_batches = mb;
  return s;
}

// Two stages on one rank: stage 0 scales by a, stage 1 by b; loss = sum(out - target)^2.
struct TwoStages {
  at::Tensor a = at::full({1}, 2.0, at::kDouble).requires_grad_(true);
  at::Tensor b = at::full({1}, -0.5, at::kDouble).requires_grad_(true);
  Stage s0{0, false, [a = a](const at::Tensor& x, const MicroBatch&) { return x * a; }};
  Stage s1{1, true, [b = b](const at::Tensor& x, const MicroBatch&) { return x * b; }};
  Executor ex{one_rank(2, 2), 0, nullptr, {{0, &s0}, {1, &s1}},
              [](const at::Tensor& out, const at::Tensor& t) { return (out - t).pow(2).sum(); }, {}};
};

std::vector<MicroBatch> micros() {
  std::vector<MicroBatch> m(2);
  for (int i = 0; i < 2; ++i) {
    m[i].input = at::full({3}, 1.0 + i, at::kDouble);
    m[i].target = at::full({3}, 0.25, at::kDouble);
  }
  return m;
}

TEST(Executor, RunsTheActionsAndWeighsEachMicroLoss) {
  TwoStages t;
  const auto ms = micros();
  const double loss = t.ex.run(actions("0F0 1F0 1B0 0B0 0F1 1F1 1B1 0B1"), ms, {0.25, 0.75});
  // By hand.
  const at::Tensor a = t.a.detach().clone().requires_grad_(true), b = t.b.detach().clone().requires_grad_(true);
  at::Tensor want = at::zeros({}, at::kDouble);
  const double w[2] = {0.25, 0.75};
  for (int i = 0; i < 2; ++i) want = want + (ms[i].input * a * b - ms[i].target).pow(2).sum() * w[i];
  torch::autograd::backward({want});
  EXPECT_NEAR(loss, want.item<double>(), 1e-14);
  EXPECT_TRUE(t.a.grad().allclose(a.grad(), 1e-10, 0)) << t.a.grad() << a.grad();
  EXPECT_TRUE(t.b.grad().allclose(b.grad(), 1e-10, 0)) << t.b.grad() << b.grad();
}

TEST(Executor, AnOverriddenFirstStageInputReplacesTheMicroInput) {
  TwoStages t;
  // What MPipe's transposed forward does: stage 0 of micro 0 gets features
  // instead of micro 0's input (zeros here, so the output is 0).
  t.ex.set_first_stage_input(0, at::zeros({3}, at::kDouble));
  EXPECT_NEAR(t.ex.run(actions("0F0 1F0 1B0 0B0"), micros()), 3 * 0.25 * 0.25, 1e-15);
  // Consumed by that step: the next one reads the micro's input again.
  TwoStages u;
  EXPECT_NEAR(t.ex.run(actions("0F0 1F0 1B0 0B0"), micros()), u.ex.run(actions("0F0 1F0 1B0 0B0"), micros()), 1e-15);
}

TEST(Executor, AHandlerCanBeReplaced) {
  TwoStages t;
  std::vector<std::string> seen;
  t.ex.register_handler(ActionType::BWD, [&seen](const Action& a) { seen.push_back(schedule::format_action(a)); });
  t.ex.run(actions("0F0 1F0 1B0 0B0"), micros());
  EXPECT_EQ(seen, (std::vector<std::string>{"1B0", "0B0"}));
  EXPECT_FALSE(t.a.grad().defined());
}

TEST(Executor, BadListsAndArgumentsAreNamed) {
  TwoStages t;
  try {
    t.ex.run(actions("0F0 0MPIPE_PARAM_BROADCAST"), micros());
    ADD_FAILURE() << "an action without a handler ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
  }
  TwoStages u;
  EXPECT_THROW(u.ex.run(actions("0F0"), micros(), {1.0}), std::invalid_argument);  // one weight for 2 micros
  EXPECT_THROW(u.ex.run(actions("2F0"), micros()), std::logic_error);              // a stage it does not hold
  EXPECT_THROW(Executor(one_rank(1, 1), 0, nullptr, {}, {}, {}).run(actions("0F0"), {}), std::logic_error);
  schedule::ScheduleOptions two = one_rank(1, 1);
  two.pp = 2;
  EXPECT_THROW(Executor(two, 0, nullptr, {}, {}, {}), std::invalid_argument);  // pp > 1 needs a group
}

}  // namespace
}  // namespace hp::runtime
