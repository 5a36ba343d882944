#include "schedule/validate.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "schedule/comm_check.hpp"

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
  static constexpr int kBodyTypes = 8;   // FWD .. RECV_B
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

class Validator {
 public:
  explicit Validator(const Schedule& s) : s_(s), o_(s.options), pp_(s.pp()), placement_(s.options.placement()) {}

  ValidationResult run() {
    if (check_options() && check_structure()) {
      index_actions();
      if (indexed_) {
        check_coverage();
        if (has_mpipe_) check_mpipe_coverage();
        check_dependencies();
      }
      for (ValidationIssue& i : check_communication(s_)) add(i.rank, i.position, std::move(i.message));
    }
    if (suppressed_ > 0)
      result_.issues.push_back({-1, -1, "... and " + std::to_string(suppressed_) + " more issues"});
    return std::move(result_);
  }

 private:
  const Action& act(int rank, int pos) const { return s_.ranks[rank][pos]; }
  std::string tok(int rank, int pos) const { return format_action(act(rank, pos)); }
  // ScheduleOptions::rank_of with the placement looked up once: it is asked per action.
  int rank_of_stage(int stage) const { return placed_rank(placement_, o_.pp, stage); }
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

  bool pairs_with_next(int r, int p) const {
    const auto& list = s_.ranks[r];
    return act(r, p).type == ActionType::FWD && p + 1 < static_cast<int>(list.size()) &&
           is_input_backward(list[p + 1].type);
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
        if (a.overlap && !pairs_with_next(r, p))
          add_at(r, p, "an overlapped forward must be followed at once by a backward (B or I) of this rank, as (1F1;2B0)");
        if (is_mpipe(a.type)) has_mpipe_ = true;
      }
    return ok;
  }

  void index_actions() {
    offset_.assign(pp_ + 1, 0);
    for (int r = 0; r < pp_; ++r) offset_[r + 1] = offset_[r] + static_cast<int>(s_.ranks[r].size());
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
          add_at(r, p,
                 "appears twice (first at rank " + std::to_string(o.rank) + " position " + std::to_string(o.pos) + ")");
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
    // The cell is named only in a report: building the name for each of a
    // million cells would cost more than the check.
    auto cell = [](int st, int m) { return "stage " + std::to_string(st) + " micro " + std::to_string(m); };
    for (int st = 0; st < S; ++st)
      for (int m = 0; m < o_.micro_batches; ++m) {
        if (index_.find(ActionType::FWD, st, m) < 0) add(rank_of_stage(st), -1, cell(st, m) + " has no forward");
        // Either the whole backward, or its input part and its weight part.
        const int b = index_.find(ActionType::BWD, st, m), i = index_.find(ActionType::BWD_I, st, m),
                  w = index_.find(ActionType::BWD_W, st, m);
        if (o_.forward_only) {
          for (int gi : {b, i, w})
            if (gi >= 0) {
              const Loc l = loc(gi);
              add_at(l.rank, l.pos, "a backward in a forward-only schedule");
            }
          continue;
        }
        if (b >= 0 && (i >= 0 || w >= 0)) {
          const Loc l = loc(b);
          add_at(l.rank, l.pos, "the backward also runs split (I and W): run it whole or split, once");
        } else if (b < 0 && i < 0 && w < 0) {
          add(rank_of_stage(st), -1, cell(st, m) + " has no backward");
        } else if (b < 0 && (i < 0) != (w < 0)) {
          add(rank_of_stage(st), -1, cell(st, m) + (i < 0 ? " has a weight backward (W) but no input backward (I)"
                                                          : " has an input backward (I) but no weight backward (W)"));
        }
      }
  }

  // The backward of (stage, micro) that produces its input's gradient: BWD,
  // or BWD_I when the schedule splits it (BWD when it has neither, for the report).
  Action input_backward(int stage, int micro) const {
    const bool split = index_.find(ActionType::BWD_I, stage, micro) >= 0;
    return {split ? ActionType::BWD_I : ActionType::BWD, stage, micro};
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
          case ActionType::BWD_I:
            need_before(r, p, {ActionType::FWD, st, m});
            if (st < last) {
              const int next = rank_of_stage(st + 1);
              need_before(r, p, next != r ? Action{ActionType::RECV_B, st, m, next} : input_backward(st + 1, m));
            }
            break;
          case ActionType::BWD_W: need_before(r, p, {ActionType::BWD_I, st, m}); break;
          case ActionType::SEND_F: need_before(r, p, {ActionType::FWD, st, m}); break;
          case ActionType::SEND_B: need_before(r, p, input_backward(st, m)); break;
          case ActionType::MPIPE_FWD_SEND:
          case ActionType::MPIPE_GRAPH_SEND:
          case ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD:
            need_before(r, p, {ActionType::MPIPE_TRANSPOSE_FWD, 0, m});
            break;
          case ActionType::MPIPE_GRAD_SEND: need_before(r, p, input_backward(0, m)); break;
          case ActionType::MPIPE_TRANSPOSE_BWD:
            need_before(r, p, input_backward(0, m));
            // A micro transposed elsewhere is recomputed from its shipped input.
            if (const auto recv = find(ActionType::MPIPE_FWD_RECV, 0, m))
              need_before(r, p, {ActionType::MPIPE_GRAPH_RECV, 0, m, act(recv->rank, recv->pos).peer});
            break;
          default: break;
        }
      }
  }


  const Schedule& s_;
  const ScheduleOptions& o_;
  const int pp_;
  const Placement placement_;  // the schedule table's, for the options' kind (or MPipe's body)
  bool has_mpipe_ = false;
  std::vector<int> offset_;  // global index of (rank r, position p) = offset_[r] + p
  ActionIndex index_;
  bool indexed_ = false;  // index_ is built; checks that look actions up need it
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
