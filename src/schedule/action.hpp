// The per-rank action IR: one Action is one step a pipeline rank executes.
//
// Stages are numbered globally, in the layout's placement (schedule.hpp: loop,
// stage s = chunk * PP + rank, or V). Every
// action names the stage it belongs to, the micro-batch it works on (-1 when
// it has none: MPIPE_PARAM_BROADCAST, MPIPE_GRAD_REDUCE) and, for
// communication, the peer rank (-1 for compute and collectives).
//
// Text form, one token per action (like torch.distributed.pipelining's
// _Action): compute is exactly "{stage}F{micro}" / "{stage}B{micro}", and
// the split backward "{stage}I{micro}" / "{stage}W{micro}";
// every other action is "{stage}{TYPE}{micro}" with the micro omitted when
// there is none, followed by "@{peer}" when it has a peer:
//   2F0  5B3  3I1  3W1  1SEND_F0@2  0MPIPE_PARAM_BROADCAST  0MPIPE_FWD_RECV3@3
// format_action and parse_action round-trip exactly.
//
// A forward that runs overlapped with the backward right after it
// (DualPipeV's F&B pair, PyTorch's OVERLAP_F_B) carries Action::overlap; a
// rank's list writes the pair as one token, "(1F1;2B0)" (format_actions,
// parse_actions). Nothing sits between the two: their receives come before
// the pair, their sends after it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hp::schedule {

enum class ActionType : std::uint8_t {
  // Body pipeline.
  FWD,     // forward of (stage, micro)
  BWD,     // backward of (stage, micro): BWD_I and BWD_W in one
  // The backward split (zero-bubble schedules; PyTorch's BACKWARD_INPUT and
  // BACKWARD_WEIGHT): a (stage, micro) runs either BWD, or BWD_I and later BWD_W.
  BWD_I,   // the gradient of the stage's input only: what the previous stage waits for
  BWD_W,   // the weights' gradients, from what BWD_I kept; nobody waits for it
  SEND_F,  // send stage's forward output of micro to the rank of stage + 1
  RECV_F,  // receive stage's forward input of micro from the rank of stage - 1
  SEND_B,  // send the gradient of stage's input of micro to the rank of stage - 1
  RECV_B,  // receive the gradient of stage's output of micro from the rank of stage + 1
  // MPipe Transpose (spec section 3). Their stage is always 0.
  MPIPE_PARAM_BROADCAST,  // collective: preprocess parameters rank 0 -> all
  MPIPE_TRANSPOSE_FWD,    // owner runs the detached preprocess forward (T = 0: the data load)
  MPIPE_FWD_SEND,         // owner -> rank 0: preprocess output into body0's input slot
  MPIPE_FWD_RECV,         // rank 0 <- owner
  MPIPE_GRAPH_SEND,       // owner -> rank 0: preprocess input, for the recompute backward
  MPIPE_GRAPH_RECV,       // rank 0 <- owner
  MPIPE_TRANSPOSE_BWD,    // rank 0: (recompute and) backprop the preprocess after BWD(0, m)
  // Owner backward (the suffix after every rank's body).
  MPIPE_GRAD_SEND,                 // rank 0 -> owner: dL/dfeatures of micro
  MPIPE_GRAD_RECV_WITH_BACKWARD,   // owner <- rank 0, then backprop its retained graph
  MPIPE_GRAD_REDUCE,               // collective: sum preprocess gradients over the PP group
};

inline constexpr int kNumActionTypes = 18;
static_assert(kNumActionTypes <= 32, "the classification below keeps one bit per type in 32 bits");

struct Action {
  ActionType type = ActionType::FWD;
  int stage = 0;
  int micro = -1;
  int peer = -1;
  // A FWD that runs overlapped with the backward (BWD or BWD_I) that follows
  // it in the rank's list. Last, so {type, stage, micro, peer} still builds one.
  bool overlap = false;

  friend bool operator==(const Action& a, const Action& b) {
    return a.type == b.type && a.stage == b.stage && a.micro == b.micro && a.peer == b.peer && a.overlap == b.overlap;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

// The type's name as it appears in text ("FWD", "SEND_F", "MPIPE_FWD_SEND", ...).
std::string_view type_name(ActionType t);
std::optional<ActionType> type_from_name(std::string_view name);
// A compute's letter in text and grids ('F', 'B', 'I', 'W'), and back.
char compute_letter(ActionType t);
std::optional<ActionType> compute_from_letter(char c);

// Classification used by validation, simulation and rendering. Inline bit
// tests: the engine's passes over a million-action schedule ask these
// several times per action, and a chain of compares mispredicts.
namespace action_detail {
constexpr std::uint32_t bit(ActionType t) { return 1u << static_cast<int>(t); }
constexpr std::uint32_t kSend = bit(ActionType::SEND_F) | bit(ActionType::SEND_B) | bit(ActionType::MPIPE_FWD_SEND) |
                                bit(ActionType::MPIPE_GRAPH_SEND) | bit(ActionType::MPIPE_GRAD_SEND);
constexpr std::uint32_t kRecv = bit(ActionType::RECV_F) | bit(ActionType::RECV_B) | bit(ActionType::MPIPE_FWD_RECV) |
                                bit(ActionType::MPIPE_GRAPH_RECV) | bit(ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD);
constexpr std::uint32_t kCollective = bit(ActionType::MPIPE_PARAM_BROADCAST) | bit(ActionType::MPIPE_GRAD_REDUCE);
constexpr bool in(std::uint32_t mask, ActionType t) { return (mask >> static_cast<int>(t)) & 1u; }
}  // namespace action_detail

constexpr bool is_compute(ActionType t) { return t <= ActionType::BWD_W; }
// The backward that consumes the output's gradient and produces the input's
// (BWD or BWD_I): what a gradient message goes between.
constexpr bool is_input_backward(ActionType t) { return t == ActionType::BWD || t == ActionType::BWD_I; }
// Any part of a backward (BWD, BWD_I, BWD_W).
constexpr bool is_backward(ActionType t) { return t >= ActionType::BWD && t <= ActionType::BWD_W; }
// Every MPIPE_* member.
constexpr bool is_mpipe(ActionType t) { return t >= ActionType::MPIPE_PARAM_BROADCAST; }
// Point-to-point sends (body and MPipe).
constexpr bool is_send(ActionType t) { return action_detail::in(action_detail::kSend, t); }
// Point-to-point receives (body and MPipe).
constexpr bool is_recv(ActionType t) { return action_detail::in(action_detail::kRecv, t); }
// MPIPE_PARAM_BROADCAST, MPIPE_GRAD_REDUCE.
constexpr bool is_collective(ActionType t) { return action_detail::in(action_detail::kCollective, t); }
constexpr bool is_p2p(ActionType t) { return action_detail::in(action_detail::kSend | action_detail::kRecv, t); }
// Communication: a point-to-point operation or a collective.
constexpr bool is_comm(ActionType t) {
  return action_detail::in(action_detail::kSend | action_detail::kRecv | action_detail::kCollective, t);
}
// The receive type that matches a send type (SEND_F -> RECV_F, ...), and
// back; any other type is its own match.
constexpr ActionType matching_p2p(ActionType t) {
  switch (t) {
    case ActionType::SEND_F: return ActionType::RECV_F;
    case ActionType::RECV_F: return ActionType::SEND_F;
    case ActionType::SEND_B: return ActionType::RECV_B;
    case ActionType::RECV_B: return ActionType::SEND_B;
    case ActionType::MPIPE_FWD_SEND: return ActionType::MPIPE_FWD_RECV;
    case ActionType::MPIPE_FWD_RECV: return ActionType::MPIPE_FWD_SEND;
    case ActionType::MPIPE_GRAPH_SEND: return ActionType::MPIPE_GRAPH_RECV;
    case ActionType::MPIPE_GRAPH_RECV: return ActionType::MPIPE_GRAPH_SEND;
    case ActionType::MPIPE_GRAD_SEND: return ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD;
    case ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD: return ActionType::MPIPE_GRAD_SEND;
    default: return t;
  }
}
// Whether a micro-batch index is part of the action (false for the collectives).
constexpr bool has_micro(ActionType t) { return !is_collective(t); }

// One action's token; an overlapped forward alone reads as a plain forward.
std::string format_action(const Action& a);
// Parses one action's token; returns nullopt (and sets *error when given) on bad input.
std::optional<Action> parse_action(std::string_view token, std::string* error = nullptr);
// A rank's list as tokens, each overlapped pair as one "(F;B)" token.
std::vector<std::string> format_actions(const std::vector<Action>& actions);
// Appends the action or the overlapped pair one token holds; false (and
// *error when given) on bad input, leaving out as it was.
bool parse_actions(std::string_view token, std::vector<Action>& out, std::string* error = nullptr);

}  // namespace hp::schedule
