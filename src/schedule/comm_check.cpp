#include "schedule/comm_check.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace hp::schedule {
namespace {

// The sending stage of the message a p2p action carries: a RECV_F of stage s
// receives what stage s-1 sent, a RECV_B what stage s+1 sent.
int message_stage(const Action& a) {
  if (a.type == ActionType::RECV_F) return a.stage - 1;
  if (a.type == ActionType::RECV_B) return a.stage + 1;
  return a.stage;
}

bool messages_match(const Action& send, const Action& recv) {
  return matching_p2p(send.type) == recv.type && message_stage(send) == message_stage(recv) &&
         send.micro == recv.micro;
}

// The receive that a send needs on its peer (for messages naming what was expected).
Action expected_recv(const Action& send, int sender) {
  Action r{matching_p2p(send.type), send.stage, send.micro, sender};
  if (send.type == ActionType::SEND_F) r.stage = send.stage + 1;
  if (send.type == ActionType::SEND_B) r.stage = send.stage - 1;
  return r;
}

bool is_comm(ActionType t) { return is_p2p(t) || is_collective(t); }

class CommChecker {
 public:
  explicit CommChecker(const Schedule& s) : s_(s), pp_(s.pp()) {
    offset_.assign(pp_ + 1, 0);
    for (int r = 0; r < pp_; ++r) offset_[r + 1] = offset_[r] + static_cast<int>(s_.ranks[r].size());
    coll_pos_.assign(pp_, {});
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p)
        if (is_collective(act(r, p).type)) coll_pos_[r].push_back(p);
  }

  std::vector<ValidationIssue> run() {
    match_p2p();
    match_collectives();
    check_deadlock();
    return std::move(issues_);
  }

 private:
  const Action& act(int rank, int pos) const { return s_.ranks[rank][pos]; }
  std::string tok(int rank, int pos) const { return format_action(act(rank, pos)); }
  int rank_of_index(int gi) const {
    return static_cast<int>(std::upper_bound(offset_.begin(), offset_.end(), gi) - offset_.begin()) - 1;
  }
  void add(int rank, int pos, std::string msg) { issues_.push_back({rank, pos, std::move(msg)}); }
  void add_at(int rank, int pos, const std::string& msg) { add(rank, pos, tok(rank, pos) + ": " + msg); }

  // Pairs the k-th send from a to b with the k-th receive on b from a, as the
  // runtime's FIFO channels do, and reports the first disagreement per pair.
  void match_p2p() {
    link_.assign(offset_[pp_], -1);
    struct Channel {
      std::vector<int> sends, recvs;  // global indices, in program order
    };
    std::unordered_map<std::uint64_t, Channel> channels;
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p) {
        const Action& a = act(r, p);
        if (!is_p2p(a.type)) continue;
        const bool send = is_send(a.type);
        const std::uint64_t from = send ? r : a.peer, to = send ? a.peer : r;
        Channel& c = channels[from * static_cast<std::uint64_t>(pp_) + to];
        (send ? c.sends : c.recvs).push_back(offset_[r] + p);
      }
    std::vector<std::uint64_t> order;
    for (auto& [k, c] : channels) order.push_back(k);
    std::sort(order.begin(), order.end());  // deterministic reports
    for (std::uint64_t k : order) {
      const Channel& c = channels[k];
      const int from = static_cast<int>(k / pp_), to = static_cast<int>(k % pp_);
      const size_t n = std::min(c.sends.size(), c.recvs.size());
      bool reported = false;
      for (size_t i = 0; i < n; ++i) {
        link_[c.sends[i]] = c.recvs[i];
        link_[c.recvs[i]] = c.sends[i];
        const int sp = c.sends[i] - offset_[from], rp = c.recvs[i] - offset_[to];
        if (!reported && !messages_match(act(from, sp), act(to, rp))) {
          add_at(from, sp,
                 "FIFO mismatch: send #" + std::to_string(i) + " from rank " + std::to_string(from) + " to rank " +
                     std::to_string(to) + " meets receive #" + std::to_string(i) + " at rank " + std::to_string(to) +
                     " position " + std::to_string(rp) + " (" + tok(to, rp) + "), expected " +
                     format_action(expected_recv(act(from, sp), from)));
          reported = true;
        }
      }
      if (reported) continue;
      if (c.sends.size() > n) {
        const int sp = c.sends[n] - offset_[from];
        add_at(from, sp, "send #" + std::to_string(n) + " from rank " + std::to_string(from) + " to rank " +
                             std::to_string(to) + " has no matching receive; rank " + std::to_string(to) + " posts only " +
                             std::to_string(c.recvs.size()) + " receives from rank " + std::to_string(from));
      } else if (c.recvs.size() > n) {
        const int rp = c.recvs[n] - offset_[to];
        add_at(to, rp, "receive #" + std::to_string(n) + " on rank " + std::to_string(to) + " from rank " +
                           std::to_string(from) + " has no matching send; rank " + std::to_string(from) + " posts only " +
                           std::to_string(c.sends.size()) + " sends to rank " + std::to_string(to));
      }
    }
  }

  // Collectives span the whole PP group, so every rank must post the same
  // sequence; the k-th collective of each rank is one operation.
  void match_collectives() {
    for (int r = 0; r < pp_; ++r)
      for (size_t k = 0; k < coll_pos_[r].size(); ++k) link_[offset_[r] + coll_pos_[r][k]] = static_cast<int>(k);
    for (int r = 1; r < pp_; ++r) {
      const auto &mine = coll_pos_[r], &ref = coll_pos_[0];
      const size_t n = std::min(mine.size(), ref.size());
      size_t k = 0;
      while (k < n && act(r, mine[k]).type == act(0, ref[k]).type) ++k;
      if (k < n)
        add_at(r, mine[k], "collective #" + std::to_string(k) + " differs from rank 0's (" + tok(0, ref[k]) +
                               " at position " + std::to_string(ref[k]) + "); every rank posts the same collectives in order");
      else if (mine.size() != ref.size())
        add(r, -1, "rank " + std::to_string(r) + " posts " + std::to_string(mine.size()) + " collectives, rank 0 posts " +
                       std::to_string(ref.size()));
    }
  }

  // Blocking-rendezvous execution (see validate.hpp). Each rank advances at
  // most once over its list and each operation completes once, so the run is
  // linear; a rank is revisited only when an operation of its batch completes.
  void check_deadlock() {
    const int total = offset_[pp_];
    size_t max_coll = 0;
    for (auto& c : coll_pos_) max_coll = std::max(max_coll, c.size());
    std::vector<int> pc(pp_, 0), bstart(pp_, 0), bend(pp_, 0), remaining(pp_, 0), coll_posted(max_coll, 0);
    std::vector<char> done(total, 0);
    std::vector<int> work;
    for (int r = pp_ - 1; r >= 0; --r) work.push_back(r);

    auto posted = [&](int q, int gi) { return gi >= offset_[q] + bstart[q] && gi < offset_[q] + bend[q]; };
    auto complete = [&](int q, int gi) {
      done[gi] = 1;
      if (--remaining[q] == 0) work.push_back(q);
    };
    auto run = [&](int r) {
      const auto& acts = s_.ranks[r];
      const int n = static_cast<int>(acts.size());
      if (bend[r] > bstart[r]) {
        if (remaining[r] > 0) return;
        pc[r] = bstart[r] = bend[r];
      }
      while (pc[r] < n) {
        if (!is_comm(acts[pc[r]].type)) {
          bstart[r] = bend[r] = ++pc[r];
          continue;
        }
        int e = pc[r];
        // MPIPE_GRAD_RECV_WITH_BACKWARD closes its batch: its backward runs
        // once the receive completes, so nothing after it is posted before.
        while (e < n && is_comm(acts[e].type))
          if (acts[e++].type == ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD) break;
        bstart[r] = pc[r];
        bend[r] = e;
        remaining[r] = e - pc[r];
        for (int p = pc[r]; p < e; ++p) {
          const int gi = offset_[r] + p;
          if (is_collective(acts[p].type)) {
            const int k = link_[gi];
            if (++coll_posted[k] == pp_)
              for (int q = 0; q < pp_; ++q) complete(q, offset_[q] + coll_pos_[q][k]);
          } else if (const int other = link_[gi]; other >= 0 && posted(rank_of_index(other), other)) {
            complete(r, gi);
            complete(rank_of_index(other), other);
          }
        }
        if (remaining[r] > 0) return;
        pc[r] = bstart[r] = bend[r] = e;
      }
    };
    while (!work.empty()) {
      const int r = work.back();
      work.pop_back();
      run(r);
    }
    report_deadlock(pc, bstart, bend, done);
  }

  void report_deadlock(const std::vector<int>& pc, const std::vector<int>& bstart, const std::vector<int>& bend,
                       const std::vector<char>& done) {
    // Where a blocked rank waits: the first unfinished operation of its batch.
    auto waiting = [&](int q) {
      for (int p = bstart[q]; p < bend[q]; ++p)
        if (!done[offset_[q] + p]) return p;
      return pc[q];
    };
    auto state = [&](int q) {
      if (pc[q] >= static_cast<int>(s_.ranks[q].size())) return std::string("has finished");
      const int p = waiting(q);
      return "is at " + std::to_string(p) + " (" + tok(q, p) + ")";
    };
    std::string msg;
    int first_rank = -1, first_pos = -1;
    for (int r = 0; r < pp_; ++r) {
      if (pc[r] >= static_cast<int>(s_.ranks[r].size())) continue;
      const int p = waiting(r);
      const Action& a = act(r, p);
      if (first_rank < 0) first_rank = r, first_pos = p;
      msg += msg.empty() ? "deadlock: " : "; ";
      msg += "rank " + std::to_string(r) + " at " + std::to_string(p) + " (" + format_action(a) + ") waits for ";
      const int gi = offset_[r] + p;
      if (is_collective(a.type)) {
        const int k = link_[gi];
        int absent = -1;
        for (int q = 0; q < pp_ && absent < 0; ++q)
          if (static_cast<int>(coll_pos_[q].size()) <= k || !(coll_pos_[q][k] >= bstart[q] && coll_pos_[q][k] < bend[q]))
            absent = q;
        msg += "every rank to post collective #" + std::to_string(k);
        if (absent >= 0) msg += "; rank " + std::to_string(absent) + " " + state(absent);
      } else if (link_[gi] < 0) {
        msg += "rank " + std::to_string(a.peer) + ", which never posts the matching " +
               std::string(is_send(a.type) ? "receive" : "send");
      } else {
        msg += "rank " + std::to_string(a.peer) + ", which " + state(a.peer);
      }
    }
    if (first_rank >= 0) add(first_rank, first_pos, msg);
  }

  const Schedule& s_;
  const int pp_;
  std::vector<int> offset_;  // global index of (rank r, position p) = offset_[r] + p
  // Per global index: a p2p op's FIFO partner (-1 when unmatched), a collective's sequence number.
  std::vector<int> link_;
  std::vector<std::vector<int>> coll_pos_;  // per rank, positions of its collectives
  std::vector<ValidationIssue> issues_;
};

}  // namespace

std::vector<ValidationIssue> check_communication(const Schedule& s) { return CommChecker(s).run(); }

}  // namespace hp::schedule
