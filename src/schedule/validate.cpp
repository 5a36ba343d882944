#include "schedule/validate.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace hp::schedule {
namespace {

// A broken schedule can yield one issue per action; past this many the rest
// are only counted, so a report stays readable and validation stays linear.
constexpr int kMaxIssues = 200;
// Layout sizes beyond this are surely typos, and would overflow int indices.
constexpr int kMaxIndex = 1 << 30;

// Where an action with a micro-batch first occurs: a dense table over
// (type, stage, micro) of global indices. Body types span every stage; MPipe
// types live on stage 0 only. Dense beats hashing here: the table is a few
// MB at PP 64, v 4, MB 1024 and validation is bound by its lookups.
class ActionIndex {
 public:
  void reset(int stages, int micros) {
    stages_ = stages;
    micros_ = micros;
    first_.assign(static_cast<size_t>(kBodyTypes * stages + kMPipeTypes) * micros, -1);
  }
  // Records global index gi; returns the earlier occurrence, or -1.
  int add(const Action& a, int gi) {
    int& slot = first_[index(a.type, a.stage, a.micro)];
    if (slot >= 0) return slot;
    slot = gi;
    return -1;
  }
  int find(ActionType t, int stage, int micro) const { return first_[index(t, stage, micro)]; }

 private:
  static constexpr int kBodyTypes = 6;   // FWD .. RECV_B
  static constexpr int kMPipeTypes = 8;  // MPIPE_TRANSPOSE_FWD .. MPIPE_GRAD_RECV_WITH_BACKWARD
  size_t index(ActionType t, int stage, int micro) const {
    const int ti = static_cast<int>(t);
    if (ti < kBodyTypes) return (static_cast<size_t>(ti) * stages_ + stage) * micros_ + micro;
    const int mi = ti - static_cast<int>(ActionType::MPIPE_TRANSPOSE_FWD);
    return (static_cast<size_t>(kBodyTypes) * stages_ + mi) * micros_ + micro;
  }
  int stages_ = 0, micros_ = 0;
  std::vector<int> first_;
};

struct Loc {
  int rank = -1;
  int pos = -1;
};

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

std::string at(int rank, int pos) {
  return "rank " + std::to_string(rank) + " position " + std::to_string(pos);
}

class Validator {
 public:
  explicit Validator(const Schedule& s) : s_(s), o_(s.options), pp_(s.pp()) {}

  ValidationResult run() {
    if (check_options() && check_structure()) {
      index_actions();
      if (indexed_) {
        check_coverage();
        if (has_mpipe_) check_mpipe_coverage();
        check_dependencies();
      }
      match_p2p();
      match_collectives();
      check_deadlock();
    }
    if (suppressed_ > 0)
      result_.issues.push_back({-1, -1, "... and " + std::to_string(suppressed_) + " more issues"});
    return std::move(result_);
  }

 private:
  const Action& act(int rank, int pos) const { return s_.ranks[rank][pos]; }
  std::string tok(int rank, int pos) const { return format_action(act(rank, pos)); }
  int rank_of_stage(int stage) const { return stage % o_.pp; }
  int rank_of_index(int gi) const {
    return static_cast<int>(std::upper_bound(offset_.begin(), offset_.end(), gi) - offset_.begin()) - 1;
  }

  void add(int rank, int pos, std::string msg) {
    if (static_cast<int>(result_.issues.size()) >= kMaxIssues) {
      ++suppressed_;
      return;
    }
    result_.issues.push_back({rank, pos, std::move(msg)});
  }
  void add_at(int rank, int pos, const std::string& msg) { add(rank, pos, tok(rank, pos) + ": " + msg); }

  bool check_options() {
    const int before = static_cast<int>(result_.issues.size());
    if (o_.pp < 1 || o_.vpp < 1 || o_.micro_batches < 1)
      add(-1, -1, "options need pp, vpp and micro_batches >= 1, got pp " + std::to_string(o_.pp) + ", vpp " +
                      std::to_string(o_.vpp) + ", micro_batches " + std::to_string(o_.micro_batches));
    else if (static_cast<long long>(o_.pp) * o_.vpp >= kMaxIndex || o_.micro_batches >= kMaxIndex)
      add(-1, -1, "options too large: pp * vpp and micro_batches must stay below 2^30");
    if (pp_ != o_.pp)
      add(-1, -1, "the schedule has " + std::to_string(pp_) + " rank lists but options.pp is " + std::to_string(o_.pp));
    return static_cast<int>(result_.issues.size()) == before;
  }

  // Returns why the action cannot appear at all on this rank, or "".
  std::string structure_error(int r, const Action& a) const {
    const int S = o_.num_stages();
    const ActionType t = a.type;
    if (is_mpipe(t)) {
      if (a.stage != 0) return "MPipe actions belong to stage 0";
    } else if (a.stage < 0 || a.stage >= S) {
      return "stage out of range [0, " + std::to_string(S) + ")";
    }
    if (has_micro(t)) {
      if (a.micro < 0 || a.micro >= o_.micro_batches)
        return "micro-batch out of range [0, " + std::to_string(o_.micro_batches) + ")";
    } else if (a.micro != -1) {
      return "a collective has no micro-batch";
    }
    if (!is_p2p(t)) {
      if (a.peer != -1) return "only sends and receives have a peer";
    } else if (a.peer < 0 || a.peer >= pp_) {
      return "peer out of range [0, " + std::to_string(pp_) + ")";
    } else if (a.peer == r) {
      return "peer is the rank itself";
    }
    if (!is_mpipe(t) && rank_of_stage(a.stage) != r)
      return "stage " + std::to_string(a.stage) + " runs on rank " + std::to_string(rank_of_stage(a.stage));
    auto neighbour = [&](int other, const char* what) -> std::string {
      if (other < 0 || other >= S) return std::string("stage ") + std::to_string(a.stage) + " has no " + what;
      const int want = rank_of_stage(other);
      if (want == r) return "stage " + std::to_string(other) + " is on the same rank; nothing travels";
      if (a.peer != want)
        return "wrong peer: the " + std::string(what) + " (stage " + std::to_string(other) + ") is on rank " +
               std::to_string(want);
      return "";
    };
    switch (t) {
      case ActionType::SEND_F: return neighbour(a.stage + 1, "next stage");
      case ActionType::RECV_F: return neighbour(a.stage - 1, "previous stage");
      case ActionType::SEND_B: return neighbour(a.stage - 1, "previous stage");
      case ActionType::RECV_B: return neighbour(a.stage + 1, "next stage");
      case ActionType::MPIPE_FWD_SEND:
      case ActionType::MPIPE_GRAPH_SEND:
      case ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD:
        if (r == 0) return "rank 0 cannot run this (it is the owner's side of a transfer with rank 0)";
        if (a.peer != 0) return "wrong peer: the other side is rank 0";
        return "";
      case ActionType::MPIPE_FWD_RECV:
      case ActionType::MPIPE_GRAPH_RECV:
      case ActionType::MPIPE_GRAD_SEND:
      case ActionType::MPIPE_TRANSPOSE_BWD:
        if (r != 0) return "only rank 0 runs this";
        return "";
      default: return "";
    }
  }

  // Later checks index by stage, micro and peer, so they run only on a
  // structurally sound schedule.
  bool check_structure() {
    bool ok = true;
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p) {
        const Action& a = act(r, p);
        if (std::string why = structure_error(r, a); !why.empty()) {
          add_at(r, p, why);
          ok = false;
        }
        if (is_mpipe(a.type)) has_mpipe_ = true;
      }
    return ok;
  }

  void index_actions() {
    offset_.assign(pp_ + 1, 0);
    for (int r = 0; r < pp_; ++r) offset_[r + 1] = offset_[r] + static_cast<int>(s_.ranks[r].size());
    coll_pos_.assign(pp_, {});
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p)
        if (is_collective(act(r, p).type)) coll_pos_[r].push_back(p);
    // A layout far larger than the schedule cannot be covered; say so once
    // instead of allocating a table for it.
    const long long cells = static_cast<long long>(o_.num_stages()) * o_.micro_batches;
    if (cells > 4LL * offset_[pp_] + 4096) {
      add(-1, -1, "the layout needs " + std::to_string(2 * cells) + " forward and backward actions, the schedule has " +
                      std::to_string(offset_[pp_]) + " actions in all");
      return;
    }
    indexed_ = true;
    index_.reset(o_.num_stages(), o_.micro_batches);
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p) {
        const Action& a = act(r, p);
        if (is_collective(a.type)) continue;
        if (const int first = index_.add(a, offset_[r] + p); first >= 0) {
          const Loc o = loc(first);
          add_at(r, p, "appears twice (first at " + at(o.rank, o.pos) + ")");
        }
      }
  }

  Loc loc(int gi) const {
    const int r = rank_of_index(gi);
    return {r, gi - offset_[r]};
  }
  std::optional<Loc> find(ActionType t, int stage, int micro) const {
    const int gi = index_.find(t, stage, micro);
    if (gi < 0) return std::nullopt;
    return loc(gi);
  }

  void check_coverage() {
    const int S = o_.num_stages();
    for (int st = 0; st < S; ++st)
      for (int m = 0; m < o_.micro_batches; ++m) {
        const char* missing = !find(ActionType::FWD, st, m)   ? "forward"
                              : !find(ActionType::BWD, st, m) ? "backward"
                                                              : nullptr;
        if (missing)
          add(rank_of_stage(st), -1,
              "stage " + std::to_string(st) + " micro " + std::to_string(m) + " has no " + missing);
      }
  }

  // The rank that runs micro m's preprocess forward, or -1 when it has none.
  int transpose_owner(int m) const {
    const auto o = find(ActionType::MPIPE_TRANSPOSE_FWD, 0, m);
    return o ? o->rank : -1;
  }

  void check_mpipe_coverage() {
    for (int m = 0; m < o_.micro_batches; ++m) {
      const std::string micro = "micro " + std::to_string(m);
      const int owner = transpose_owner(m);
      if (owner < 0) {
        add(0, -1, micro + " has no MPIPE_TRANSPOSE_FWD, so FWD(0, " + std::to_string(m) + ") has no input");
        continue;
      }
      const auto send = find(ActionType::MPIPE_FWD_SEND, 0, m);
      const auto recv = find(ActionType::MPIPE_FWD_RECV, 0, m);
      if (owner == 0) {
        if (send) add_at(send->rank, send->pos, micro + " is transposed on rank 0 itself; nothing to send");
        if (recv) add_at(recv->rank, recv->pos, micro + " is transposed on rank 0 itself; nothing to receive");
      } else {
        if (!send || send->rank != owner)
          add(owner, -1, micro + " is transposed on rank " + std::to_string(owner) + " but that rank has no " +
                             format_action({ActionType::MPIPE_FWD_SEND, 0, m, 0}));
        if (!recv)
          add(0, -1, micro + " is transposed on rank " + std::to_string(owner) + " but rank 0 has no " +
                         format_action({ActionType::MPIPE_FWD_RECV, 0, m, owner}));
      }
      // Every transfer of micro m's preprocess runs between rank 0 and its owner.
      for (ActionType t : {ActionType::MPIPE_FWD_SEND, ActionType::MPIPE_GRAPH_SEND,
                           ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD}) {
        const auto o = find(t, 0, m);
        if (o && o->rank != owner)
          add_at(o->rank, o->pos, micro + " is transposed on rank " + std::to_string(owner) + ", not here");
      }
      for (ActionType t : {ActionType::MPIPE_FWD_RECV, ActionType::MPIPE_GRAPH_RECV, ActionType::MPIPE_GRAD_SEND}) {
        const auto o = find(t, 0, m);
        if (o && act(o->rank, o->pos).peer != owner)
          add_at(o->rank, o->pos, "wrong peer: " + micro + " is transposed on rank " + std::to_string(owner));
      }
    }
  }

  // Reports unless `dep` occurs on rank r before position p.
  void need_before(int r, int p, const Action& dep) {
    const int gi = index_.find(dep.type, dep.stage, dep.micro);
    if (gi >= offset_[r] && gi < offset_[r] + p) return;
    const auto o = find(dep.type, dep.stage, dep.micro);
    const std::string want = "needs " + format_action(dep) + " earlier on rank " + std::to_string(r);
    if (!o)
      add_at(r, p, want + ", but the schedule has none");
    else if (o->rank != r)
      add_at(r, p, want + ", but it is on rank " + std::to_string(o->rank));
    else
      add_at(r, p, want + ", but it comes later, at position " + std::to_string(o->pos));
  }

  void check_dependencies() {
    const int last = o_.num_stages() - 1;
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p) {
        const Action& a = act(r, p);
        const int st = a.stage, m = a.micro;
        switch (a.type) {
          case ActionType::FWD:
            if (st > 0) {
              const int prev = rank_of_stage(st - 1);
              need_before(r, p, prev != r ? Action{ActionType::RECV_F, st, m, prev} : Action{ActionType::FWD, st - 1, m});
            } else if (has_mpipe_) {
              const int owner = transpose_owner(m);
              if (owner == 0) need_before(r, p, {ActionType::MPIPE_TRANSPOSE_FWD, 0, m});
              if (owner > 0) need_before(r, p, {ActionType::MPIPE_FWD_RECV, 0, m, owner});
            }
            break;
          case ActionType::BWD:
            need_before(r, p, {ActionType::FWD, st, m});
            if (st < last) {
              const int next = rank_of_stage(st + 1);
              need_before(r, p, next != r ? Action{ActionType::RECV_B, st, m, next} : Action{ActionType::BWD, st + 1, m});
            }
            break;
          case ActionType::SEND_F: need_before(r, p, {ActionType::FWD, st, m}); break;
          case ActionType::SEND_B: need_before(r, p, {ActionType::BWD, st, m}); break;
          case ActionType::MPIPE_FWD_SEND:
          case ActionType::MPIPE_GRAPH_SEND:
          case ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD:
            need_before(r, p, {ActionType::MPIPE_TRANSPOSE_FWD, 0, m});
            break;
          case ActionType::MPIPE_GRAD_SEND: need_before(r, p, {ActionType::BWD, 0, m}); break;
          case ActionType::MPIPE_TRANSPOSE_BWD:
            need_before(r, p, {ActionType::BWD, 0, m});
            // A micro transposed elsewhere is recomputed from its shipped input.
            if (const auto recv = find(ActionType::MPIPE_FWD_RECV, 0, m))
              need_before(r, p, {ActionType::MPIPE_GRAPH_RECV, 0, m, act(recv->rank, recv->pos).peer});
            break;
          default: break;
        }
      }
  }

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
                     std::to_string(to) + " meets receive #" + std::to_string(i) + " at " + at(to, rp) + " (" +
                     tok(to, rp) + "), expected " + format_action(expected_recv(act(from, sp), from)));
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
  const ScheduleOptions& o_;
  const int pp_;
  bool has_mpipe_ = false;
  std::vector<int> offset_;  // global index of (rank r, position p) = offset_[r] + p
  ActionIndex index_;
  bool indexed_ = false;  // index_ is built; checks that look actions up need it
  // Per global index: a p2p op's FIFO partner (-1 when unmatched), a collective's sequence number.
  std::vector<int> link_;
  std::vector<std::vector<int>> coll_pos_;  // per rank, positions of its collectives
  ValidationResult result_;
  int suppressed_ = 0;
};

}  // namespace

std::string ValidationResult::to_string() const {
  std::string out;
  for (const ValidationIssue& i : issues) {
    if (i.rank >= 0) {
      out += "rank " + std::to_string(i.rank);
      if (i.position >= 0) out += " position " + std::to_string(i.position);
      // Messages tied to an action start with its token; lift it into the prefix.
      const size_t colon = i.message.find(": ");
      if (colon != std::string::npos && parse_action(std::string_view(i.message).substr(0, colon))) {
        out += " (" + i.message.substr(0, colon) + "): " + i.message.substr(colon + 2);
      } else {
        out += ": " + i.message;
      }
    } else {
      out += i.message;
    }
    out += '\n';
  }
  return out;
}

ValidationResult validate(const Schedule& s) { return Validator(s).run(); }

}  // namespace hp::schedule
