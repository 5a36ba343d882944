#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "train/op_profile.hpp"

using hp::train::OpProfile;
using hp::train::OpTime;

namespace {

OpTime find(const std::vector<OpTime>& ops, const std::string& name) {
  auto it = std::find_if(ops.begin(), ops.end(), [&](const OpTime& t) { return t.name == name; });
  return it == ops.end() ? OpTime{} : *it;
}

std::unique_ptr<at::RecordFunction> open_range(const char* name) {
  auto range = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (range->isActive()) range->before(name);
  return range;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The time around an event: read just before and just after it.
struct Bracket {
  std::chrono::steady_clock::time_point before, after;
};
template <class F>
Bracket bracket(F&& event) {
  Bracket b;
  b.before = std::chrono::steady_clock::now();
  event();
  b.after = std::chrono::steady_clock::now();
  return b;
}
double us(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

TEST(OpProfile, CountsEachOperatorsCallsAndItsTimeWithoutItsChildren) {
  at::manual_seed(118);  // a failure reproduces
  const at::Tensor a = at::randn({64, 64}), b = at::randn({64, 64});
  OpProfile profile;
  for (int i = 0; i < 10; ++i) at::mm(a, b);
  for (int i = 0; i < 3; ++i) at::matmul(a, b);  // aten::matmul calls aten::mm
  const auto ops = profile.stop();
  const OpTime mm = find(ops, "aten::mm"), matmul = find(ops, "aten::matmul");
  EXPECT_EQ(mm.calls, 13);
  EXPECT_EQ(matmul.calls, 3);
  EXPECT_GT(mm.self_us, 0);
  EXPECT_LE(mm.self_us, mm.total_us);
  EXPECT_LT(matmul.self_us, matmul.total_us);  // its mm is not its own time
  for (std::size_t i = 1; i < ops.size(); ++i) EXPECT_GE(ops[i - 1].self_us, ops[i].self_us);
  // A new profile starts from nothing.
  at::mm(a, b);
  OpProfile again;
  EXPECT_TRUE(again.stop().empty());
}

// c10d's gloo ranges end where the transfer completes: out of order, and on
// another thread. Each range must still get its own start and end.
TEST(OpProfile, PairsRangesThatEndOutOfOrderOrOnAnotherThread) {
  at::manual_seed(119);  // a failure reproduces
  OpProfile profile;
  std::unique_ptr<at::RecordFunction> first, second;
  const Bracket open_first = bracket([&] { first = open_range("hp::first"); });
  sleep_ms(2);
  const Bracket open_second = bracket([&] { second = open_range("hp::second"); });
  sleep_ms(2);
  const Bracket close_first = bracket([&] { first.reset(); });  // ends before the range opened inside it
  sleep_ms(100);
  const Bracket close_second = bracket([&] { second.reset(); });
  auto sent = open_range("hp::sent");
  const at::Tensor a = at::randn({32, 32});
  at::mm(a, a);
  const at::ThreadLocalState state;
  std::thread([&] {
    at::ThreadLocalStateGuard guard(state);
    sent.reset();
  }).join();
  const auto ops = profile.stop();
  const OpTime f = find(ops, "hp::first"), s = find(ops, "hp::second"), sent_time = find(ops, "hp::sent");
  EXPECT_EQ(f.calls, 1);
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(sent_time.calls, 1);
  // Each range spans its own open and close: at least from just after the one to just before the
  // other, at most from just before to just after (1 ms for the profiler's clock being another
  // one). The sleeps apart are lower bounds, which load only stretches: a range given another's
  // end lies outside its bracket by at least 98 ms, however long they took.
  auto expect_spans = [](const OpTime& t, const Bracket& open, const Bracket& close) {
    EXPECT_GE(t.total_us, us(close.before - open.after) - 1000) << t.name;
    EXPECT_LE(t.total_us, us(close.after - open.before) + 1000) << t.name;
  };
  expect_spans(f, open_first, close_first);
  expect_spans(s, open_second, close_second);
  EXPECT_GE(s.total_us, 100e3);
  for (const OpTime& t : ops) {
    EXPECT_GE(t.self_us, 0) << t.name;
    EXPECT_LE(t.self_us, t.total_us) << t.name;
  }
}
