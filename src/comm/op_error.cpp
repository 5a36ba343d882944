#include "comm/op_error.hpp"

#include <sstream>

#include "comm/error_text.hpp"

namespace hp::comm {

std::string describe(const OpInfo& info) {
  std::ostringstream os;
  if (info.peer >= 0) {
    os << info.op;
    if (!info.label.empty()) os << " " << info.label;
    os << (info.op == "send" ? " to rank " : " from rank ") << info.peer << " (tag " << info.tag << ")";
  } else {
    os << info.label;
  }
  return os.str();
}

std::string group_suffix(const Shared& sh) {
  if (sh.members.empty()) return "";
  std::ostringstream os;
  os << " of the " << sh.name << " group [";
  for (size_t i = 0; i < sh.members.size(); ++i) os << (i ? ", " : "") << sh.members[i];
  os << "]";
  return os.str();
}

std::string describe_in(const Shared& sh, OpInfo info) {
  // Messages name global ranks, as the launcher does.
  info.peer = global_of(sh, info.peer);
  return describe(info) + group_suffix(sh);
}

CommError make_error(const Shared& sh, OpInfo info, const std::string& transport_message, bool timed_out) {
  std::ostringstream os;
  os << "rank " << global_of(sh, sh.env.rank) << ": " << describe_in(sh, info);
  info.peer = global_of(sh, info.peer);
  if (timed_out) {
    os << " timed out after " << format_duration(sh.timeout) << "; ";
    if (info.peer >= 0) {
      os << "is rank " << info.peer << " alive?";
    } else {
      os << "are all " << sh.env.world_size << " ranks" << group_suffix(sh) << " alive and calling it in the same order?";
    }
  } else {
    os << " failed: " << transport_message;
    if (looks_like_peer_gone(transport_message)) {
      if (info.peer >= 0) {
        os << " (did rank " << info.peer << " exit or crash?)";
      } else {
        os << " (did another rank exit or crash?)";
      }
    }
  }
  return CommError(os.str(), global_of(sh, sh.env.rank), info.peer, info.op, info.tag, timed_out);
}

}  // namespace hp::comm
