#include "schedule/comm_check.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "schedule/p2p_channels.hpp"

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

class CommChecker {
 public:
  explicit CommChecker(const Schedule& s) : s_(s), pp_(s.pp()), channels_(s.pp()) {
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
  std::int64_t operations() const { return operations_; }

 private:
  // One ordered rank pair (p2p_channels.hpp). Its k-th send and k-th receive
  // are one message, so both the matching and the rendezvous run keep
  // counts per channel instead of a partner per action.
  struct Channel {
    int sends = 0, recvs = 0;  // in all
    int first = 0;             // its sends' positions start at send_pos_[first], in program order
    int mismatch = -1;         // the first receive # that does not take its send's message
    int mismatch_pos = -1;     // that receive's position
    int extra_recv_pos = -1;   // position of receive #sends, when there are more receives than sends
    int sends_posted = 0, recvs_posted = 0;  // rendezvous run: operations posted so far
  };

  const Action& act(int rank, int pos) const { return s_.ranks[rank][pos]; }
  std::string tok(int rank, int pos) const { return format_action(act(rank, pos)); }
  void add(int rank, int pos, std::string msg) { issues_.push_back({rank, pos, std::move(msg)}); }
  void add_at(int rank, int pos, const std::string& msg) { add(rank, pos, tok(rank, pos) + ": " + msg); }
  // The channel a p2p action of rank r uses.
  Channel& channel_of(int r, const Action& a) {
    return chan_[is_send(a.type) ? channels_.id(r, a.peer) : channels_.id(a.peer, r)];
  }

  // Pairs the k-th send from a to b with the k-th receive on b from a, as the
  // runtime's FIFO channels do, and reports the first disagreement per pair.
  void match_p2p() {
    for (int r = 0; r < pp_; ++r)
      for (const Action& a : s_.ranks[r]) {
        if (!is_p2p(a.type)) continue;
        const int c = is_send(a.type) ? channels_.id(r, a.peer) : channels_.id(a.peer, r);
        if (c == static_cast<int>(chan_.size())) chan_.emplace_back();
        ++(is_send(a.type) ? chan_[c].sends : chan_[c].recvs);
      }
    int total = 0;
    for (Channel& ch : chan_) {
      ch.first = total;
      total += ch.sends;
    }
    send_pos_.resize(total);
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p)
        if (is_send(act(r, p).type)) {
          Channel& ch = channel_of(r, act(r, p));
          send_pos_[ch.first + ch.sends_posted++] = p;
        }
    // Each channel's receives all lie on its receiver, in program order.
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p) {
        const Action& a = act(r, p);
        if (!is_recv(a.type)) continue;
        Channel& ch = channel_of(r, a);
        const int k = ch.recvs_posted++;
        if (k < ch.sends) {
          if (ch.mismatch < 0 && !messages_match(act(a.peer, send_pos_[ch.first + k]), a)) {
            ch.mismatch = k;
            ch.mismatch_pos = p;
          }
        } else if (k == ch.sends) {
          ch.extra_recv_pos = p;
        }
      }
    for (Channel& ch : chan_) ch.sends_posted = ch.recvs_posted = 0;
    // Deterministic reports: channels by sender, then receiver.
    std::vector<int> order(chan_.size());
    for (int c = 0; c < static_cast<int>(order.size()); ++c) order[c] = c;
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      return std::make_pair(channels_.from(x), channels_.to(x)) < std::make_pair(channels_.from(y), channels_.to(y));
    });
    for (int c : order) report_channel(c);
  }

  void report_channel(int c) {
    const Channel& ch = chan_[c];
    const int from = channels_.from(c), to = channels_.to(c);
    const int n = std::min(ch.sends, ch.recvs);
    if (ch.mismatch >= 0) {
      const int i = ch.mismatch, sp = send_pos_[ch.first + i], rp = ch.mismatch_pos;
      add_at(from, sp,
             "FIFO mismatch: send #" + std::to_string(i) + " from rank " + std::to_string(from) + " to rank " +
                 std::to_string(to) + " meets receive #" + std::to_string(i) + " at rank " + std::to_string(to) +
                 " position " + std::to_string(rp) + " (" + tok(to, rp) + "), expected " +
                 format_action(expected_recv(act(from, sp), from)));
    } else if (ch.sends > n) {
      const int sp = send_pos_[ch.first + n];
      add_at(from, sp, "send #" + std::to_string(n) + " from rank " + std::to_string(from) + " to rank " +
                           std::to_string(to) + " has no matching receive; rank " + std::to_string(to) + " posts only " +
                           std::to_string(ch.recvs) + " receives from rank " + std::to_string(from));
    } else if (ch.recvs > n) {
      const int rp = ch.extra_recv_pos;
      add_at(to, rp, "receive #" + std::to_string(n) + " on rank " + std::to_string(to) + " from rank " +
                         std::to_string(from) + " has no matching send; rank " + std::to_string(from) + " posts only " +
                         std::to_string(ch.sends) + " sends to rank " + std::to_string(to));
    }
  }

  // Collectives span the whole PP group, so every rank must post the same
  // sequence; the k-th collective of each rank is one operation.
  void match_collectives() {
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
  // A p2p operation completes when its channel partner (same number, other
  // side) is posted too: whichever of the two is posted second completes both.
  void check_deadlock() {
    size_t max_coll = 0;
    for (auto& c : coll_pos_) max_coll = std::max(max_coll, c.size());
    pc_.assign(pp_, 0);
    bstart_.assign(pp_, 0);
    bend_.assign(pp_, 0);
    coll_posted_.assign(max_coll, 0);
    std::vector<int> remaining(pp_, 0), coll_joined(pp_, 0);
    std::vector<int> work;
    for (int r = pp_ - 1; r >= 0; --r) work.push_back(r);

    auto complete = [&](int q) {
      if (--remaining[q] == 0) work.push_back(q);
    };
    auto run = [&](int r) {
      ++operations_;
      const auto& acts = s_.ranks[r];
      const int n = static_cast<int>(acts.size());
      int& pc = pc_[r];
      if (bend_[r] > bstart_[r]) {
        if (remaining[r] > 0) return;
        pc = bstart_[r] = bend_[r];
      }
      while (pc < n) {
        if (!is_comm(acts[pc].type)) {
          ++operations_;
          bstart_[r] = bend_[r] = ++pc;
          continue;
        }
        int e = pc;
        // MPIPE_GRAD_RECV_WITH_BACKWARD closes its batch: its backward runs
        // once the receive completes, so nothing after it is posted before.
        while (e < n && is_comm(acts[e].type))
          if (acts[e++].type == ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD) break;
        bstart_[r] = pc;
        bend_[r] = e;
        remaining[r] = e - pc;
        for (int p = pc; p < e; ++p) {
          ++operations_;
          const Action& a = acts[p];
          if (is_collective(a.type)) {
            const int k = coll_joined[r]++;
            if (++coll_posted_[k] == pp_)
              for (int q = 0; q < pp_; ++q) complete(q);
          } else if (is_send(a.type)) {
            Channel& ch = channel_of(r, a);
            if (ch.sends_posted++ < ch.recvs_posted) complete(r), complete(a.peer);
          } else {
            Channel& ch = channel_of(r, a);
            if (ch.recvs_posted++ < ch.sends_posted) complete(r), complete(a.peer);
          }
        }
        if (remaining[r] > 0) return;
        pc = bstart_[r] = bend_[r] = e;
      }
    };
    while (!work.empty()) {
      const int r = work.back();
      work.pop_back();
      run(r);
    }
    report_deadlock();
  }

  // After the run: the number of a posted p2p operation in its channel (its
  // batch is posted whole, so it is the channel's posted count less the
  // operations of the channel that follow it in the batch).
  int posted_number(int q, int p) {
    const Action& a = act(q, p);
    const Channel& ch = channel_of(q, a);
    int later = 0;
    for (int x = p + 1; x < bend_[q]; ++x) {
      const Action& b = act(q, x);
      later += is_p2p(b.type) && is_send(b.type) == is_send(a.type) && b.peer == a.peer;
    }
    return (is_send(a.type) ? ch.sends_posted : ch.recvs_posted) - 1 - later;
  }
  // The number of rank q's collective at position p.
  int collective_number(int q, int p) const {
    return static_cast<int>(std::lower_bound(coll_pos_[q].begin(), coll_pos_[q].end(), p) - coll_pos_[q].begin());
  }
  // Whether the posted operation at (q, p) has completed.
  bool completed(int q, int p) {
    const Action& a = act(q, p);
    if (is_collective(a.type)) return coll_posted_[collective_number(q, p)] == pp_;
    const Channel& ch = channel_of(q, a);
    return posted_number(q, p) < (is_send(a.type) ? ch.recvs_posted : ch.sends_posted);
  }
  // Whether a p2p operation has a partner at all (its channel has as many of the other side).
  bool paired(int q, int p) {
    const Action& a = act(q, p);
    const Channel& ch = channel_of(q, a);
    return posted_number(q, p) < (is_send(a.type) ? ch.recvs : ch.sends);
  }

  void report_deadlock() {
    // Where a blocked rank waits: the first unfinished operation of its batch.
    auto waiting = [&](int q) {
      for (int p = bstart_[q]; p < bend_[q]; ++p)
        if (!completed(q, p)) return p;
      return pc_[q];
    };
    auto state = [&](int q) {
      if (pc_[q] >= static_cast<int>(s_.ranks[q].size())) return std::string("has finished");
      const int p = waiting(q);
      return "is at " + std::to_string(p) + " (" + tok(q, p) + ")";
    };
    std::string msg;
    int first_rank = -1, first_pos = -1;
    for (int r = 0; r < pp_; ++r) {
      if (pc_[r] >= static_cast<int>(s_.ranks[r].size())) continue;
      const int p = waiting(r);
      const Action& a = act(r, p);
      if (first_rank < 0) first_rank = r, first_pos = p;
      msg += msg.empty() ? "deadlock: " : "; ";
      msg += "rank " + std::to_string(r) + " at " + std::to_string(p) + " (" + format_action(a) + ") waits for ";
      if (is_collective(a.type)) {
        const int k = collective_number(r, p);
        int absent = -1;
        for (int q = 0; q < pp_ && absent < 0; ++q)
          if (static_cast<int>(coll_pos_[q].size()) <= k || !(coll_pos_[q][k] >= bstart_[q] && coll_pos_[q][k] < bend_[q]))
            absent = q;
        msg += "every rank to post collective #" + std::to_string(k);
        if (absent >= 0) msg += "; rank " + std::to_string(absent) + " " + state(absent);
      } else if (!paired(r, p)) {
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
  ChannelIndex channels_;
  std::vector<Channel> chan_;    // by channel id
  std::vector<int> send_pos_;    // per channel, its sends' positions on the sender
  std::vector<std::vector<int>> coll_pos_;  // per rank, positions of its collectives
  // The rendezvous run's end state: per rank its position and current batch,
  // per collective how many ranks joined it.
  std::vector<int> pc_, bstart_, bend_, coll_posted_;
  std::vector<ValidationIssue> issues_;
  std::int64_t operations_ = 0;  // the rendezvous run's visits and steps (comm_check.hpp)
};

}  // namespace

std::vector<ValidationIssue> check_communication(const Schedule& s, std::int64_t* operations) {
  CommChecker checker(s);
  std::vector<ValidationIssue> issues = checker.run();
  if (operations != nullptr) *operations = checker.operations();
  return issues;
}

}  // namespace hp::schedule
