#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>

#include "train/op_profile.hpp"

using hp::train::OpProfile;
using hp::train::OpTime;

TEST(OpProfile, CountsEachOperatorsCallsAndItsTimeWithoutItsChildren) {
  const at::Tensor a = at::randn({64, 64}), b = at::randn({64, 64});
  OpProfile profile;
  for (int i = 0; i < 10; ++i) at::mm(a, b);
  for (int i = 0; i < 3; ++i) at::matmul(a, b);  // aten::matmul calls aten::mm
  const auto ops = profile.stop();
  auto find = [&](const std::string& name) {
    auto it = std::find_if(ops.begin(), ops.end(), [&](const OpTime& t) { return t.name == name; });
    return it == ops.end() ? OpTime{} : *it;
  };
  const OpTime mm = find("aten::mm"), matmul = find("aten::matmul");
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
