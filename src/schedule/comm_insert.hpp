// The body's communication as insert_body_comms (generate.hpp) places it,
// kept per rank (internal to src/schedule): generate_mpipe writes each rank's
// body straight into that rank's final list instead of copying a finished
// body (at PP 64, v 4, MB 1024 a body is 25 MB, and fresh memory is much of
// the engine's cost). Placement and repair: comm_insert.cpp.
#pragma once

#include <cstddef>
#include <vector>

#include "schedule/message_end.hpp"
#include "schedule/schedule.hpp"

namespace hp::schedule {

// A body message between two ranks. Ids number messages in production order
// (by the producer's end time, then rank, then position).
struct BodyMessage {
  int stage = 0;  // the producing compute's stage
  int micro = 0;
  int seq = 0;    // position among the sender's messages to the receiver
  bool forward = true;  // an activation (SEND_F / RECV_F), else a gradient
};

class BodyComms {
 public:
  // Checks the options and the compute order, places every message and
  // repairs the placement; throws std::invalid_argument as insert_body_comms does.
  BodyComms(const ScheduleOptions& o, std::vector<std::vector<Action>> compute);

  int pp() const { return static_cast<int>(compute_.size()); }
  // Actions of rank r's body: its computes with their sends and receives.
  std::size_t size(int r) const { return compute_[r].size() + ends_[r].size(); }
  // Appends rank r's body to out.
  void append(int r, std::vector<Action>& out) const;

 private:
  Action action(MessageEnd e) const;

  std::vector<std::vector<Action>> compute_;
  std::vector<BodyMessage> msgs_;                // by id
  std::vector<std::vector<MessageEnd>> ends_;  // per rank, sorted
  std::vector<int> stage_rank_;                 // the rank of each stage
};

}  // namespace hp::schedule
