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
#include <tuple>
#include <vector>

#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

constexpr int kForwardTime = 1;
constexpr int kBackwardTime = 2;

// Stage layout of one body order, and dense ids of its computes.
struct Layout {
  int pp = 1;
  int stages = 1;
  int micro_batches = 1;
  int rank_of(int stage) const { return stage % pp; }
  int id(ActionType t, int stage, int micro) const {
    return ((t == ActionType::FWD ? 0 : 1) * stages + stage) * micro_batches + micro;
  }
  int num_ids() const { return 2 * stages * micro_batches; }
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
        if (a.type == ActionType::BWD) {
          dep(ActionType::FWD, a.stage);
          if (a.stage + 1 < l.stages) dep(ActionType::BWD, a.stage + 1);
        }
        if (ready < 0) break;
        free_at[r] = ready + (a.type == ActionType::FWD ? kForwardTime : kBackwardTime);
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

// One end of a message. Both ends of message k share k, its key and its
// place in its channel's send order.
struct End {
  Action action;
  int msg = 0;
  int slot = 0;  // slot i is the gap before compute i; a send of compute i sits in slot i + 1
};

using Key = std::tuple<int, int, int>;  // producer's end time, producer rank, producer position

struct Message {
  Key key;
  int sender = 0, receiver = 0;
  int seq = 0;          // position among the sender's messages to the receiver
  int recv_end = -1;    // index of the receiving End in ends[receiver]
};

// Strongly connected components of the batch precedence graph. Nodes are
// the messages and, per rank, one node for each gap between consecutive
// batches: every message of a batch points to the gap after it, the gap to
// every message of the next batch. Expects every rank's ends sorted by slot.
class Precedence {
 public:
  Precedence(const std::vector<std::vector<End>>& ends, int num_messages)
      : ends_(ends), messages_(num_messages), out_(2 * num_messages, -1) {
    for (int r = 0; r < static_cast<int>(ends.size()); ++r) {
      const auto& rank = ends[r];
      auto batch_end = [&](size_t i) {
        while (++i < rank.size() && rank[i].slot == rank[i - 1].slot) {
        }
        return i;
      };
      for (size_t i = 0, j; i < rank.size(); i = j) {
        j = batch_end(i);
        if (j == rank.size()) break;
        const int gap = messages_ + static_cast<int>(gaps_.size());
        gaps_.push_back({r, j, batch_end(j)});
        for (size_t k = i; k < j; ++k)
          out_[2 * rank[k].msg + (is_send(rank[k].action.type) ? 0 : 1)] = gap;
      }
    }
    component_.assign(messages_ + gaps_.size(), -1);
    tarjan();
  }
  int component(int msg) const { return component_[msg]; }
  int num_components() const { return num_components_; }
  bool acyclic() const { return num_components_ == 0; }

 private:
  struct Gap {
    int rank;
    size_t begin, end;  // the next batch in ends_[rank]
  };

  // The e-th successor of node v, or -1 past the last (some may be -2: none).
  int successor(int v, size_t e) const {
    if (v < messages_) return e < 2 ? (out_[2 * v + e] >= 0 ? out_[2 * v + e] : -2) : -1;
    const Gap& g = gaps_[v - messages_];
    return g.begin + e < g.end ? ends_[g.rank][g.begin + e].msg : -1;
  }

  void tarjan() {
    const int n = static_cast<int>(component_.size());
    std::vector<int> index(n, -1), low(n, 0), stack;
    std::vector<char> on_stack(n, 0);
    std::vector<std::pair<int, size_t>> call;
    int counter = 0;
    for (int root = 0; root < n; ++root) {
      if (index[root] >= 0) continue;
      call.push_back({root, 0});
      index[root] = low[root] = counter++;
      stack.push_back(root);
      on_stack[root] = 1;
      while (!call.empty()) {
        auto& [v, e] = call.back();
        if (const int w = successor(v, e); w != -1) {
          ++e;
          if (w < 0) continue;
          if (index[w] < 0) {
            index[w] = low[w] = counter++;
            stack.push_back(w);
            on_stack[w] = 1;
            call.push_back({w, 0});
          } else if (on_stack[w]) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        const int done = v;
        call.pop_back();
        if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
        if (low[done] != index[done]) continue;
        const bool trivial = stack.back() == done;
        for (int w = -1; w != done;) {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          if (!trivial) component_[w] = num_components_;
        }
        if (!trivial) ++num_components_;
      }
    }
  }

  const std::vector<std::vector<End>>& ends_;
  const int messages_;
  std::vector<int> out_;  // per message: the gap after its send's batch, after its receive's batch
  std::vector<Gap> gaps_;
  std::vector<int> component_;
  int num_components_ = 0;
};

void sort_ends(std::vector<End>& rank, const std::vector<Message>& msgs) {
  // Within a batch: the send first, then receives in the order their
  // messages were produced (which keeps each channel's FIFO order).
  std::sort(rank.begin(), rank.end(), [&](const End& x, const End& y) {
    if (x.slot != y.slot) return x.slot < y.slot;
    const bool xs = is_send(x.action.type), ys = is_send(y.action.type);
    if (xs != ys) return xs;
    return msgs[x.msg].key < msgs[y.msg].key;
  });
}

// FIFO repair; returns whether a receive moved.
bool repair_fifo(std::vector<std::vector<End>>& ends, const std::vector<Message>& msgs, int pp) {
  bool moved = false;
  for (int b = 0; b < pp; ++b) {
    // Receives of each channel into b, in send order.
    std::vector<std::vector<End*>> by_seq(pp);
    for (End& e : ends[b]) {
      if (!is_recv(e.action.type)) continue;
      auto& v = by_seq[msgs[e.msg].sender];
      if (static_cast<int>(v.size()) <= msgs[e.msg].seq) v.resize(msgs[e.msg].seq + 1, nullptr);
      v[msgs[e.msg].seq] = &e;
    }
    for (auto& v : by_seq) {
      int bound = -1;
      for (auto it = v.rbegin(); it != v.rend(); ++it) {
        if (!*it) continue;
        if (bound >= 0 && (*it)->slot > bound) (*it)->slot = bound, moved = true;
        bound = (*it)->slot;
      }
    }
  }
  return moved;
}

// Deadlock repair, one round; returns whether a receive moved. A receive of
// a cycle moves up to the earliest earlier batch of its rank that holds a
// message of the same cycle produced after it (moving to the latest such
// batch also works, but needs more rounds for no shorter schedule).
bool repair_cycles(std::vector<std::vector<End>>& ends, const std::vector<Message>& msgs) {
  const Precedence graph(ends, static_cast<int>(msgs.size()));
  if (graph.acyclic()) return false;
  bool moved = false;
  // Per component, the batches seen so far on this rank: slot and the
  // largest key of the component up to and including that batch.
  struct Seen {
    std::vector<int> slots;
    std::vector<Key> prefix_max;
  };
  std::vector<Seen> seen(graph.num_components());
  for (auto& rank : ends) {
    for (Seen& x : seen) x.slots.clear(), x.prefix_max.clear();
    for (End& e : rank) {
      const int c = graph.component(e.msg);
      if (c < 0) continue;
      Seen& x = seen[c];
      const Key& key = msgs[e.msg].key;
      if (is_recv(e.action.type)) {
        const auto it = std::upper_bound(x.prefix_max.begin(), x.prefix_max.end(), key);
        if (it != x.prefix_max.end() && x.slots[it - x.prefix_max.begin()] < e.slot) {
          e.slot = x.slots[it - x.prefix_max.begin()];
          moved = true;
          continue;  // the next round sees it in its new batch
        }
      }
      if (x.slots.empty() || x.slots.back() != e.slot) {
        x.slots.push_back(e.slot);
        x.prefix_max.push_back(x.prefix_max.empty() ? key : std::max(x.prefix_max.back(), key));
      } else {
        x.prefix_max.back() = std::max(x.prefix_max.back(), key);
      }
    }
  }
  return moved;
}

}  // namespace

std::vector<std::vector<Action>> insert_body_comms(const ScheduleOptions& o,
                                                   std::vector<std::vector<Action>> compute) {
  check_options(o);
  Layout l;
  l.pp = o.pp;
  l.stages = o.num_stages();
  l.micro_batches = o.micro_batches;
  check_compute(l, compute);
  const std::vector<int> end = asap_end_times(l, compute);

  // Natural placement of every message's two ends.
  std::vector<Message> msgs;
  std::vector<std::vector<End>> ends(l.pp);
  std::vector<int> msg_of(l.num_ids(), -1);  // by producing compute
  std::vector<std::vector<int>> channel_count(l.pp, std::vector<int>(l.pp, 0));
  for (int r = 0; r < l.pp; ++r)
    for (int i = 0; i < static_cast<int>(compute[r].size()); ++i) {
      const Action& c = compute[r][i];
      const bool fwd = c.type == ActionType::FWD;
      const int to_stage = fwd ? c.stage + 1 : c.stage - 1;
      if (to_stage < 0 || to_stage >= l.stages || l.rank_of(to_stage) == r) continue;
      const int to = l.rank_of(to_stage);
      const int id = l.id(c.type, c.stage, c.micro);
      msg_of[id] = static_cast<int>(msgs.size());
      msgs.push_back({Key{end[id], r, i}, r, to, channel_count[r][to]++, -1});
      ends[r].push_back({{fwd ? ActionType::SEND_F : ActionType::SEND_B, c.stage, c.micro, to}, msg_of[id], i + 1});
    }
  for (int r = 0; r < l.pp; ++r)
    for (int i = 0; i < static_cast<int>(compute[r].size()); ++i) {
      const Action& c = compute[r][i];
      const bool fwd = c.type == ActionType::FWD;
      const int from_stage = fwd ? c.stage - 1 : c.stage + 1;
      if (from_stage < 0 || from_stage >= l.stages || l.rank_of(from_stage) == r) continue;
      const int k = msg_of[l.id(c.type, from_stage, c.micro)];
      ends[r].push_back({{fwd ? ActionType::RECV_F : ActionType::RECV_B, c.stage, c.micro, l.rank_of(from_stage)}, k, i});
    }

  for (bool moved = true; moved;) {
    for (auto& rank : ends) sort_ends(rank, msgs);
    moved = repair_fifo(ends, msgs, l.pp);
    if (moved) continue;
    moved = repair_cycles(ends, msgs);
  }

  std::vector<std::vector<Action>> out(l.pp);
  for (int r = 0; r < l.pp; ++r) {
    size_t next = 0;
    const int n = static_cast<int>(compute[r].size());
    for (int i = 0; i <= n; ++i) {
      for (; next < ends[r].size() && ends[r][next].slot == i; ++next) out[r].push_back(ends[r][next].action);
      if (i < n) out[r].push_back(compute[r][i]);
    }
  }
  return out;
}

}  // namespace hp::schedule
