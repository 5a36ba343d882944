// One end of a body message while insert_body_comms places it (internal to
// src/schedule): the message, the slot it sits in, and whether it is the send.
//
// Slot i of a rank is the gap before its compute i (a send of compute i sits
// in slot i + 1). The ends of a rank with equal slot form one batch. Message
// ids are assigned in production order (see comm_insert.cpp), so comparing
// ids compares when the messages were produced.
//
// Packed in one 64-bit word whose order is the order a rank's list keeps:
// by slot, then the send before the receives, then receives by message id.
// Sorting a rank's ends is sorting integers, and they take 8 bytes each (a
// PP 64, v 4, MB 1024 body has a million ends).
#pragma once

#include <cstdint>

namespace hp::schedule {

class MessageEnd {
 public:
  MessageEnd() = default;
  // slot and msg must lie in [0, 2^31).
  MessageEnd(int slot, bool send, int msg)
      : bits_(static_cast<std::uint64_t>(slot) << 32 | (send ? 0u : kRecvBit) | static_cast<std::uint32_t>(msg)) {}

  int slot() const { return static_cast<int>(bits_ >> 32); }
  bool is_send() const { return (bits_ & kRecvBit) == 0; }
  int msg() const { return static_cast<int>(bits_ & (kRecvBit - 1)); }
  void set_slot(int slot) { bits_ = static_cast<std::uint64_t>(slot) << 32 | (bits_ & 0xffffffffu); }

  friend bool operator<(MessageEnd a, MessageEnd b) { return a.bits_ < b.bits_; }
  friend bool operator==(MessageEnd a, MessageEnd b) { return a.bits_ == b.bits_; }

 private:
  static constexpr std::uint32_t kRecvBit = 1u << 31;
  std::uint64_t bits_ = 0;
};

}  // namespace hp::schedule
