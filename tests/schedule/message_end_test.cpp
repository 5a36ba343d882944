#include "schedule/message_end.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace hp::schedule {
namespace {

TEST(MessageEnd, RoundTripsItsFields) {
  for (int slot : {0, 1, 77, std::numeric_limits<int>::max()})
    for (bool send : {true, false})
      for (int msg : {0, 5, std::numeric_limits<int>::max()}) {
        const MessageEnd e(slot, send, msg);
        EXPECT_EQ(e.slot(), slot);
        EXPECT_EQ(e.is_send(), send);
        EXPECT_EQ(e.msg(), msg);
      }
  MessageEnd e(4, false, 9);
  e.set_slot(2);
  EXPECT_EQ(e.slot(), 2);
  EXPECT_FALSE(e.is_send());
  EXPECT_EQ(e.msg(), 9);
}

TEST(MessageEnd, OrdersBySlotThenSendFirstThenMessage) {
  std::vector<MessageEnd> v = {MessageEnd(1, false, 3), MessageEnd(1, true, 8), MessageEnd(0, false, 9),
                               MessageEnd(1, false, 2), MessageEnd(2, true, 0)};
  std::sort(v.begin(), v.end());
  const std::vector<MessageEnd> want = {MessageEnd(0, false, 9), MessageEnd(1, true, 8), MessageEnd(1, false, 2),
                                        MessageEnd(1, false, 3), MessageEnd(2, true, 0)};
  EXPECT_EQ(v, want);
}

}  // namespace
}  // namespace hp::schedule
