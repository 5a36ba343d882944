// How a group's operation is named when it fails: the words of a CommError
// (comm_error.hpp) for one send, receive or collective of a ProcessGroup. The
// messages name job-wide ranks, as the launcher does, so that the lines of
// every rank of a failed job can be matched; a subgroup's operation also
// names the subgroup (" of the dp group [1, 3]"). Internal to src/comm.
//
// Contract: pure functions of the group's state (group_state.hpp); any thread.
#pragma once

#include <string>

#include "comm/comm_error.hpp"
#include "comm/group_state.hpp"

namespace hp::comm {

// What an operation is, for error messages.
struct OpInfo {
  std::string op;     // "send", "recv", "broadcast", "all_reduce", "barrier"
  int peer = -1;      // p2p only
  int tag = -1;       // p2p only
  std::string label;  // p2p: optional message name; collectives: the description
};

// "send LABEL to rank P (tag T)" for p2p, the label for collectives.
std::string describe(const OpInfo& info);

// " of the dp group [1, 3]" for a subgroup, "" for the job's group.
std::string group_suffix(const Shared& sh);

// describe() with the peer's job-wide rank, then group_suffix(): what the
// group's errors and the heartbeat's wait notes call the operation.
std::string describe_in(const Shared& sh, OpInfo info);

// The CommError of info failing with the transport's message, or timing out after the group's timeout.
CommError make_error(const Shared& sh, OpInfo info, const std::string& transport_message, bool timed_out);

}  // namespace hp::comm
