// CommError: a communication operation failed or timed out.
//
// Every message starts with this process's rank and names the action and the
// peer, so that a log line from any rank of a failed job says who could not
// talk to whom:
//   "rank 2: recv Gradient(stage 1, micro 7) from rank 1 (tag 268500999) failed: <transport message>"
//   "rank 2: recv from rank 1 (tag 5) timed out after 30 s; is rank 1 alive?"
//   "rank 0: all_reduce (sum) of 12 Float elements over 3 ranks failed: <transport message>"
// Misuse of the API (a bad rank, a non-CPU tensor, a negative tag) is not a
// CommError but a std::invalid_argument.
#pragma once

#include <stdexcept>
#include <string>

namespace hp::comm {

class CommError : public std::runtime_error {
 public:
  CommError(const std::string& message, int rank, int peer, std::string op, int tag, bool timed_out)
      : std::runtime_error(message), rank_(rank), peer_(peer), op_(std::move(op)), tag_(tag),
        timed_out_(timed_out) {}

  int rank() const noexcept { return rank_; }         // this process's rank
  int peer() const noexcept { return peer_; }         // the other rank; -1 for collectives
  const std::string& op() const noexcept { return op_; }  // "send", "recv", "broadcast", ...
  int tag() const noexcept { return tag_; }           // -1 when the operation has no tag
  bool timed_out() const noexcept { return timed_out_; }

 private:
  int rank_;
  int peer_;
  std::string op_;
  int tag_;
  bool timed_out_;
};

}  // namespace hp::comm
