// insert_body_comms (declared in generate.hpp).
//
// Placement. A send goes right after the compute that produces its tensor
// (the runtime posts it asynchronously, so every position it waits costs
// time); a receive right before the compute that consumes it. Consecutive
// comms form one batch, so a steady 1F1B step reads
// F [SEND_F RECV_B] B [SEND_B RECV_F], Megatron's send_forward_recv_backward
// and send_backward_recv_forward.
//
// Repair. Under blocking rendezvous (validate.hpp) that natural placement can
// deadlock, e.g. with PP = 2 and v > 1 a chunk-1 gradient reaches rank 1 long
// before its chunk-0 backward consumes it, while rank 1 still has to send to
// rank 0 first; and messages between two ranks must be received in the order
// they were sent (pairwise FIFO). Both are repaired by moving receives earlier
// (into an earlier batch; the runtime buffers them), never sends:
//  * FIFO: a receive moves up to the batch of any receive, from the same
//    sender, of a message sent after it.
//  * Deadlock: order the batches of every rank; "message X is in an earlier
//    batch than message Y on some rank" is a precedence X -> Y. The schedule
//    cannot deadlock when these precedences are acyclic: the pending message
//    that is first in a topological order always has both its ends posted.
//    While they are cyclic, each cycle holds a step against the order of an
//    as-soon-as-possible run of the compute (F = 1, B = 2 time units, free
//    communication): a receive in a later batch whose message was produced
//    before one in an earlier batch. That receive moves up to the earlier
//    batch. Sends are produced in that order, so the step is always at a
//    receive, and the repair terminates.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "schedule/comm_insert.hpp"

#include "schedule/comm_cycles.hpp"
#include "schedule/generate.hpp"
#include "schedule/message_end.hpp"

namespace hp::schedule {
namespace {

// Unit times of the as-soon-as-possible run: F 1, B 2 = I 1 + W 1.
int compute_time(ActionType t) { return t == ActionType::BWD ? 2 : 1; }

// Stage layout of one body order, and dense ids of its computes.
struct Layout {
  int pp = 1;
  int stages = 1;
  int micro_batches = 1;
  std::vector<int> stage_rank;  // ScheduleOptions::rank_of, looked up: asked per message, and division is slow
  int rank_of(int stage) const { return stage_rank[stage]; }
  // Forward, the input backward (BWD or BWD_I: a (stage, micro) has one of
  // the two) and BWD_W: three classes of compute.
  static int kind(ActionType t) { return t == ActionType::FWD ? 0 : is_input_backward(t) ? 1 : 2; }
  int id(ActionType t, int stage, int micro) const { return (kind(t) * stages + stage) * micro_batches + micro; }
  int num_ids() const { return 3 * stages * micro_batches; }
};

void check_compute(const Layout& l, const std::vector<std::vector<Action>>& compute) {
  if (static_cast<int>(compute.size()) != l.pp)
    throw std::invalid_argument("insert_body_comms: got " + std::to_string(compute.size()) +
                                " rank lists for schedule.pp " + std::to_string(l.pp));
  std::vector<char> seen(l.num_ids(), 0);
  for (int r = 0; r < l.pp; ++r)
    for (const Action& a : compute[r]) {
      const bool ok = is_compute(a.type) && a.stage >= 0 && a.stage < l.stages && a.micro >= 0 &&
                      a.micro < l.micro_batches && l.rank_of(a.stage) == r;
      if (!ok || seen[l.id(a.type, a.stage, a.micro)]++)
        throw std::invalid_argument("insert_body_comms: rank " + std::to_string(r) + " holds " +
                                    format_action(a) +
                                    (ok ? " twice" : ", which is not a compute of this rank in the layout"));
    }
}

// End times of every compute under an as-soon-as-possible run of the order.
std::vector<int> asap_end_times(const Layout& l, const std::vector<std::vector<Action>>& compute) {
  std::vector<int> end(l.num_ids(), -1);
  std::vector<size_t> next(l.pp, 0);
  std::vector<int> free_at(l.pp, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < l.pp; ++r) {
      for (; next[r] < compute[r].size(); ++next[r]) {
        const Action& a = compute[r][next[r]];
        int ready = free_at[r];
        auto dep = [&](ActionType t, int stage) {
          const int e = end[l.id(t, stage, a.micro)];
          ready = e < 0 || ready < 0 ? -1 : std::max(ready, e);
        };
        if (a.type == ActionType::FWD && a.stage > 0) dep(ActionType::FWD, a.stage - 1);
        if (is_input_backward(a.type)) {
          dep(ActionType::FWD, a.stage);
          if (a.stage + 1 < l.stages) dep(ActionType::BWD, a.stage + 1);
        }
        if (a.type == ActionType::BWD_W) dep(ActionType::BWD_I, a.stage);
        if (ready < 0) break;
        free_at[r] = ready + compute_time(a.type);
        end[l.id(a.type, a.stage, a.micro)] = free_at[r];
        progress = true;
      }
    }
  }
  std::string stuck;
  for (int r = 0; r < l.pp; ++r)
    if (next[r] < compute[r].size())
      stuck += std::string(stuck.empty() ? "" : "; ") + "rank " + std::to_string(r) + " waits forever at " +
               format_action(compute[r][next[r]]) + " (position " + std::to_string(next[r]) + ")";
  if (!stuck.empty()) throw std::invalid_argument("insert_body_comms: the compute order cannot run: " + stuck);
  return end;
}

using Ends = std::vector<std::vector<MessageEnd>>;

// Keeps every rank's ends in MessageEnd order. Repairs only move receives
// to earlier slots, so the ends no smaller than every end kept before them
// are still in order; the few others are sorted apart and merged back in,
// linear in the rank's ends where sorting them all is not.
void sort_ends(Ends& ends) {
  std::vector<MessageEnd> kept, moved;
  for (auto& rank : ends) {
    if (std::is_sorted(rank.begin(), rank.end())) continue;
    kept.clear();
    moved.clear();
    for (MessageEnd e : rank) (kept.empty() || !(e < kept.back()) ? kept : moved).push_back(e);
    std::sort(moved.begin(), moved.end());
    std::merge(kept.begin(), kept.end(), moved.begin(), moved.end(), rank.begin());
  }
}

// Whether rank b takes every channel's messages in send order: no receive
// sits in a later batch than the receive of a message sent after it on the
// same channel. One pass over the rank's ends (sorted by slot), keeping per
// sender the latest message number seen in earlier slots.
bool fifo_ordered(const std::vector<MessageEnd>& rank, const std::vector<BodyMessage>& msgs, const Layout& l) {
  struct Sender {
    int slot = -1;         // the slot of its receives being read
    int in_slot = -1;      // the largest message number in that slot
    int before = -1;       // ... and in all earlier slots
  };
  std::vector<Sender> from(l.pp);
  for (MessageEnd e : rank) {
    if (e.is_send()) continue;
    const BodyMessage& m = msgs[e.msg()];
    Sender& x = from[l.rank_of(m.stage)];
    if (e.slot() != x.slot) {
      x.before = std::max(x.before, x.in_slot);
      x.slot = e.slot();
      x.in_slot = -1;
    }
    if (m.seq < x.before) return false;
    x.in_slot = std::max(x.in_slot, m.seq);
  }
  return true;
}

// FIFO repair; returns whether a receive moved.
bool repair_fifo(Ends& ends, const std::vector<BodyMessage>& msgs, const Layout& l) {
  bool moved = false;
  // Receives of each channel into b, in send order.
  std::vector<std::vector<MessageEnd*>> by_seq(l.pp);
  for (int b = 0; b < l.pp; ++b) {
    if (fifo_ordered(ends[b], msgs, l)) continue;  // nothing would move; the usual case
    for (auto& v : by_seq) v.clear();
    for (MessageEnd& e : ends[b]) {
      if (e.is_send()) continue;
      const BodyMessage& m = msgs[e.msg()];
      auto& v = by_seq[l.rank_of(m.stage)];
      if (static_cast<int>(v.size()) <= m.seq) v.resize(m.seq + 1, nullptr);
      v[m.seq] = &e;
    }
    for (auto& v : by_seq) {
      int bound = -1;
      for (auto it = v.rbegin(); it != v.rend(); ++it) {
        if (!*it) continue;
        if (bound >= 0 && (*it)->slot() > bound) (*it)->set_slot(bound), moved = true;
        bound = (*it)->slot();
      }
    }
  }
  return moved;
}

// Deadlock repair, one round; returns whether a receive moved. A receive of
// a cycle moves up to the earliest earlier batch of its rank that holds a
// message of the same cycle produced after it (moving to the latest such
// batch also works, but needs more rounds for no shorter schedule).
bool repair_cycles(Ends& ends, int num_messages) {
  const CommCycles graph(ends, num_messages);
  if (graph.acyclic()) return false;
  bool moved = false;
  // Per component, the batches seen so far on this rank: slot and the
  // latest-produced message of the component up to and including that batch.
  struct Seen {
    std::vector<int> slots;
    std::vector<int> prefix_max;
  };
  std::vector<Seen> seen(graph.num_components());
  for (auto& rank : ends) {
    for (Seen& x : seen) x.slots.clear(), x.prefix_max.clear();
    for (MessageEnd& e : rank) {
      const int c = graph.component(e.msg());
      if (c < 0) continue;
      Seen& x = seen[c];
      const int key = e.msg();
      if (!e.is_send()) {
        const auto it = std::upper_bound(x.prefix_max.begin(), x.prefix_max.end(), key);
        if (it != x.prefix_max.end() && x.slots[it - x.prefix_max.begin()] < e.slot()) {
          e.set_slot(x.slots[it - x.prefix_max.begin()]);
          moved = true;
          continue;  // the next round sees it in its new batch
        }
      }
      if (x.slots.empty() || x.slots.back() != e.slot()) {
        x.slots.push_back(e.slot());
        x.prefix_max.push_back(x.prefix_max.empty() ? key : std::max(x.prefix_max.back(), key));
      } else {
        x.prefix_max.back() = std::max(x.prefix_max.back(), key);
      }
    }
  }
  return moved;
}

}  // namespace

BodyComms::BodyComms(const ScheduleOptions& o, std::vector<std::vector<Action>> order) : compute_(std::move(order)) {
  const auto& compute = compute_;
  check_options(o);
  Layout l;
  l.pp = o.pp;
  l.stages = o.num_stages();
  l.micro_batches = o.micro_batches;
  for (int st = 0; st < l.stages; ++st) l.stage_rank.push_back(o.rank_of(st));
  check_compute(l, compute);
  const std::vector<int> end = asap_end_times(l, compute);

  // Every message, numbered in production order: a counting sort by the
  // producer's end time of the (rank, position) order, which is stable.
  std::vector<int> msg_of(l.num_ids(), -1);  // by producing compute, its message
  std::vector<int> by_end;                  // per end time, then its first message id
  int num_messages = 0;
  auto produces = [&](int r, const Action& c) {
    if (c.type == ActionType::BWD_W) return false;  // its gradients stay on the rank
    const int to_stage = c.type == ActionType::FWD ? c.stage + 1 : c.stage - 1;
    return to_stage >= 0 && to_stage < l.stages && l.rank_of(to_stage) != r;
  };
  for (int r = 0; r < l.pp; ++r)
    for (const Action& c : compute[r]) {
      if (!produces(r, c)) continue;
      const int t = end[l.id(c.type, c.stage, c.micro)];
      if (t >= static_cast<int>(by_end.size())) by_end.resize(t + 1, 0);
      ++by_end[t];
      ++num_messages;
    }
  for (int t = 0, next = 0; t < static_cast<int>(by_end.size()); ++t) next += std::exchange(by_end[t], next);
  std::vector<BodyMessage>& msgs = msgs_;
  msgs.resize(num_messages);
  std::vector<std::vector<int>> channel_count(l.pp, std::vector<int>(l.pp, 0));
  for (int r = 0; r < l.pp; ++r)
    for (const Action& c : compute[r]) {
      if (!produces(r, c)) continue;
      const bool fwd = c.type == ActionType::FWD;
      const int id = l.id(c.type, c.stage, c.micro);
      const int k = by_end[end[id]]++;
      msg_of[id] = k;
      msgs[k] = {c.stage, c.micro, channel_count[r][l.rank_of(fwd ? c.stage + 1 : c.stage - 1)]++, fwd};
    }

  // Natural placement: slot i holds the send of compute i - 1, then the
  // receive compute i consumes. An overlapped pair (computes i and i + 1)
  // takes both its receives in slot i and both its sends in slot i + 2, so
  // nothing comes between the two; repairs move receives only into slots
  // that already hold an end, so slot i + 1 stays empty. Only pairs leave a
  // rank's ends out of order, and sort_ends mends the few they displace.
  Ends& ends = ends_;
  ends.resize(l.pp);
  for (int r = 0; r < l.pp; ++r) {
    const int n = static_cast<int>(compute[r].size());
    ends[r].reserve(2 * n);
    for (int i = 0; i < n; ++i) {
      const Action& c = compute[r][i];
      const bool first_of_pair = c.overlap && i + 1 < n, second_of_pair = i > 0 && compute[r][i - 1].overlap;
      const int from_stage = c.type == ActionType::FWD ? c.stage - 1 : c.stage + 1;
      if (c.type != ActionType::BWD_W && from_stage >= 0 && from_stage < l.stages && l.rank_of(from_stage) != r)
        ends[r].emplace_back(second_of_pair ? i - 1 : i, false, msg_of[l.id(c.type, from_stage, c.micro)]);
      if (const int k = msg_of[l.id(c.type, c.stage, c.micro)]; k >= 0)
        ends[r].emplace_back(first_of_pair ? i + 2 : i + 1, true, k);
    }
  }

  for (bool moved = true; moved;) {
    sort_ends(ends);
    moved = repair_fifo(ends, msgs, l);
    if (moved) continue;
    moved = repair_cycles(ends, num_messages);
  }
  stage_rank_ = std::move(l.stage_rank);
}

// A send names the producer's stage and the receiver, a receive the
// consumer's stage and the sender.
Action BodyComms::action(MessageEnd e) const {
  const BodyMessage& m = msgs_[e.msg()];
  const int consumer = m.forward ? m.stage + 1 : m.stage - 1;
  if (e.is_send())
    return Action{m.forward ? ActionType::SEND_F : ActionType::SEND_B, m.stage, m.micro, stage_rank_[consumer]};
  return Action{m.forward ? ActionType::RECV_F : ActionType::RECV_B, consumer, m.micro, stage_rank_[m.stage]};
}

void BodyComms::append(int r, std::vector<Action>& out) const {
  const auto& compute = compute_[r];
  const auto& ends = ends_[r];
  const int n = static_cast<int>(compute.size());
  size_t next = 0;
  for (int i = 0; i <= n; ++i) {
    for (; next < ends.size() && ends[next].slot() == i; ++next) out.push_back(action(ends[next]));
    if (i < n) out.push_back(compute[i]);
  }
}

std::vector<std::vector<Action>> insert_body_comms(const ScheduleOptions& o,
                                                   std::vector<std::vector<Action>> compute) {
  const BodyComms body(o, std::move(compute));
  std::vector<std::vector<Action>> out(body.pp());
  for (int r = 0; r < body.pp(); ++r) {
    out[r].reserve(body.size(r));
    body.append(r, out[r]);
  }
  return out;
}

}  // namespace hp::schedule
