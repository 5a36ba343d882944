#include "schedule/action.hpp"

#include <array>
#include <cctype>
#include <charconv>

namespace hp::schedule {
namespace {

constexpr std::array<std::string_view, kNumActionTypes> kNames = {
    "FWD",
    "BWD",
    "BWD_I",
    "BWD_W",
    "SEND_F",
    "RECV_F",
    "SEND_B",
    "RECV_B",
    "MPIPE_PARAM_BROADCAST",
    "MPIPE_TRANSPOSE_FWD",
    "MPIPE_FWD_SEND",
    "MPIPE_FWD_RECV",
    "MPIPE_GRAPH_SEND",
    "MPIPE_GRAPH_RECV",
    "MPIPE_TRANSPOSE_BWD",
    "MPIPE_GRAD_SEND",
    "MPIPE_GRAD_RECV_WITH_BACKWARD",
    "MPIPE_GRAD_REDUCE",
};

bool parse_int(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && *out >= 0;
}

bool fail(std::string* error, std::string msg) {
  if (error) *error = std::move(msg);
  return false;
}

}  // namespace

std::string_view type_name(ActionType t) { return kNames[static_cast<int>(t)]; }

char compute_letter(ActionType t) {
  switch (t) {
    case ActionType::FWD: return 'F';
    case ActionType::BWD: return 'B';
    case ActionType::BWD_I: return 'I';
    case ActionType::BWD_W: return 'W';
    default: return '?';
  }
}

std::optional<ActionType> compute_from_letter(char c) {
  switch (c) {
    case 'F': return ActionType::FWD;
    case 'B': return ActionType::BWD;
    case 'I': return ActionType::BWD_I;
    case 'W': return ActionType::BWD_W;
    default: return std::nullopt;
  }
}

std::optional<ActionType> type_from_name(std::string_view name) {
  for (int i = 0; i < kNumActionTypes; ++i)
    if (kNames[i] == name) return static_cast<ActionType>(i);
  return std::nullopt;
}

std::string format_action(const Action& a) {
  std::string out = std::to_string(a.stage);
  if (is_compute(a.type))
    out += compute_letter(a.type);
  else
    out += type_name(a.type);
  if (a.micro >= 0) out += std::to_string(a.micro);
  if (a.peer >= 0) {
    out += '@';
    out += std::to_string(a.peer);
  }
  return out;
}

std::optional<Action> parse_action(std::string_view token, std::string* error) {
  const std::string tok(token);
  auto bad = [&](const std::string& why) -> std::optional<Action> {
    fail(error, "bad action token '" + tok + "': " + why +
                    " (expected e.g. 2F0, 5B3, 3I1, 3W1, 1SEND_F0@2, 0MPIPE_PARAM_BROADCAST)");
    return std::nullopt;
  };
  Action a;
  size_t i = 0;
  while (i < token.size() && std::isdigit(static_cast<unsigned char>(token[i]))) ++i;
  if (i == 0 || !parse_int(token.substr(0, i), &a.stage)) return bad("it must start with the stage number");
  std::string_view rest = token.substr(i);
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    if (!parse_int(rest.substr(at + 1), &a.peer)) return bad("the peer after '@' must be a rank number");
    rest = rest.substr(0, at);
  }
  size_t j = rest.size();
  while (j > 0 && std::isdigit(static_cast<unsigned char>(rest[j - 1]))) --j;
  std::string_view name = rest.substr(0, j);
  std::string_view micro = rest.substr(j);
  if (name.size() == 1 && compute_from_letter(name[0])) {
    a.type = *compute_from_letter(name[0]);
  } else if (auto t = type_from_name(name); t && !is_compute(*t)) {
    a.type = *t;
  } else {
    return bad("unknown action type '" + std::string(name) + "'");
  }
  if (has_micro(a.type)) {
    if (!parse_int(micro, &a.micro)) return bad("a micro-batch number must follow the type");
  } else if (!micro.empty()) {
    return bad(std::string(name) + " takes no micro-batch number");
  }
  if (is_p2p(a.type) != (a.peer >= 0))
    return bad(is_p2p(a.type) ? "a send or receive needs its peer as '@rank'" : "only sends and receives have a peer");
  return a;
}

std::vector<std::string> format_actions(const std::vector<Action>& actions) {
  std::vector<std::string> out;
  out.reserve(actions.size());
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].overlap && i + 1 < actions.size()) {
      out.push_back("(" + format_action(actions[i]) + ";" + format_action(actions[i + 1]) + ")");
      ++i;
    } else {
      out.push_back(format_action(actions[i]));
    }
  }
  return out;
}

bool parse_actions(std::string_view token, std::vector<Action>& out, std::string* error) {
  if (token.empty() || token.front() != '(') {
    std::optional<Action> a = parse_action(token, error);
    if (a) out.push_back(*a);
    return a.has_value();
  }
  const std::string tok(token);
  const size_t semi = token.find(';');
  if (token.back() != ')' || semi == std::string_view::npos)
    return fail(error, "bad pair token '" + tok + "': expected a forward and a backward as (1F1;2B0)");
  std::optional<Action> f = parse_action(token.substr(1, semi - 1), error);
  if (!f) return false;
  std::optional<Action> b = parse_action(token.substr(semi + 1, token.size() - semi - 2), error);
  if (!b) return false;
  if (f->type != ActionType::FWD || !is_input_backward(b->type))
    return fail(error, "bad pair token '" + tok + "': an overlapped pair is a forward, then a backward (B or I), as (1F1;2B0)");
  f->overlap = true;
  out.push_back(*f);
  out.push_back(*b);
  return true;
}

}  // namespace hp::schedule
