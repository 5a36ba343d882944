#include "schedule/simulate.hpp"

#include <cmath>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "schedule/p2p_channels.hpp"

namespace hp::schedule {

StageCost CostModel::stage(int s) const {
  auto it = per_stage.find(s);
  return it != per_stage.end() ? it->second : StageCost{f, b, i, w};
}

double all_reduce_time(double bytes, int ranks, double latency, double bw) {
  if (ranks <= 1) return 0.0;
  return latency + (bw > 0 ? 2.0 * (ranks - 1) / ranks * bytes / bw : 0.0);
}

double CostModel::tp_time(const Collectives& c) const {
  if (tp <= 1 || c.calls == 0) return 0.0;
  // Linear in the bytes, so the calls' total prices every call's own size.
  return c.calls * tp_latency + all_reduce_time(c.bytes, tp, 0.0, tp_bw);
}

double CostModel::forward_time(int s) const {
  const StageCost c = stage(s);
  return c.f + tp_time(c.tp_f);
}

double CostModel::backward_time(int s) const {
  const StageCost c = stage(s);
  return c.b + tp_time(c.tp_b);
}

void ActivationCount::count(ActionType t, RankReport& rr) {
  if (t == ActionType::FWD) rr.peak_activations = std::max(rr.peak_activations, ++active);
  if (t == ActionType::BWD || t == ActionType::BWD_W) --active;
  if (t == ActionType::BWD_I) rr.peak_awaiting_weight = std::max(rr.peak_awaiting_weight, ++awaiting_weight);
  if (t == ActionType::BWD_W) --awaiting_weight;
}

double CostModel::input_backward_time(int s) const {
  const StageCost c = stage(s);
  return c.input_backward() + tp_time(c.tp_b);
}

double CostModel::weight_backward_time(int s) const { return stage(s).weight_backward(); }

namespace {

std::string where(const Schedule& s, int rank, int pos) {
  return "rank " + std::to_string(rank) + " position " + std::to_string(pos) + " (" +
         format_action(s.ranks[rank][pos]) + ")";
}

[[noreturn]] void cannot_run(const std::string& why) {
  throw std::invalid_argument("schedule cannot run: " + why + " (validate() gives a full report)");
}

// Sends are posted eagerly and never block, so the time of every action is a
// function of its rank's previous action and, for a receive or collective, of
// its partners' times. The simulator therefore evaluates ranks in any order,
// parking a rank only at a receive whose send is not posted yet or at a
// collective that not every rank has reached; the poster wakes it. Each action
// is visited once: linear time.
//
// A run of consecutive communication actions is one batch, posted together
// as in validation and the runtime: its sends leave and its collectives are
// joined when the rank reaches the batch, even where the list puts them after
// a receive of the same batch. So a schedule validation accepts always runs.
// MPIPE_GRAD_RECV_WITH_BACKWARD closes its batch (its backward must finish
// before anything after it is posted), in validation too.
class Simulator {
 public:
  Simulator(const Schedule& s, const CostModel& c) : s_(s), c_(c), pp_(s.pp()), channels_(s.pp()) {}

  SimulationReport run() {
    index();
    pair_p2p();
    pair_collectives();
    rank_.assign(pp_, {});
    report_.ranks.assign(pp_, {});
    for (int r = 0; r < pp_; ++r) report_.ranks[r].timeline.reserve(s_.ranks[r].size());
    for (int r = pp_ - 1; r >= 0; --r) work_.push_back(r);
    while (!work_.empty()) {
      const int r = work_.back();
      work_.pop_back();
      ++report_.operations;
      advance(r);
    }
    for (int r = 0; r < pp_; ++r)
      if (rank_[r].pc < static_cast<int>(s_.ranks[r].size())) report_stuck();
    summarize();
    return std::move(report_);
  }

 private:
  struct RankState {
    int pc = 0;
    double t = 0.0;
    ActivationCount held;
    int posted_end = 0;  // the sends and collectives before this position are posted
    int collectives_joined = 0;  // collectives its posted batches joined
    int collectives_done = 0;    // collectives it has run
  };

  // Per channel (p2p_channels.hpp). Its k-th message is entry first + k of
  // the flat per-message arrays: every send and receive finds its message by
  // counting, so no per-action table is built.
  struct Channel {
    int first = 0;
    int sends = 0, recvs = 0;
    int posted = 0;    // sends posted
    int recorded = 0;  // sends the sender's timeline shows
    int received = 0;  // receives run
  };

  int channel(int from, int to) { return channels_.id(from, to); }

  void index() {
    for (int r = 0; r < pp_; ++r) {
      for (const Action& a : s_.ranks[r]) {
        if (is_mpipe(a.type)) has_mpipe_ = true;
        if (is_p2p(a.type) && (a.peer < 0 || a.peer >= pp_ || a.peer == r))
          cannot_run("bad peer in " + format_action(a) + " on rank " + std::to_string(r));
        // Rank 0 recomputes the preprocess only for micros it received.
        if (r == 0 && a.type == ActionType::MPIPE_FWD_RECV && a.micro >= 0) {
          if (a.micro >= static_cast<int>(received_.size())) received_.resize(a.micro + 1, 0);
          received_[a.micro] = 1;
        }
      }
    }
  }

  // FIFO per ordered pair of ranks, as in validation: every channel must have
  // as many receives as sends, and its k-th receive must take its k-th send.
  void pair_p2p() {
    for (int r = 0; r < pp_; ++r)
      for (const Action& a : s_.ranks[r]) {
        if (!is_p2p(a.type)) continue;
        const bool send = is_send(a.type);
        const int c = send ? channel(r, a.peer) : channel(a.peer, r);
        if (c == static_cast<int>(chan_.size())) chan_.emplace_back();
        ++(send ? chan_[c].sends : chan_[c].recvs);
      }
    int total = 0;
    for (Channel& ch : chan_) {
      if (ch.sends != ch.recvs) report_unpaired();
      ch.first = total;
      total += ch.sends;
    }
    send_type_.resize(total);
    for (int r = 0; r < pp_; ++r)
      for (const Action& a : s_.ranks[r])
        if (is_send(a.type)) {
          Channel& ch = chan_[channel(r, a.peer)];
          send_type_[ch.first + ch.posted++] = a.type;
        }
    for (int r = 0; r < pp_; ++r)
      for (const Action& a : s_.ranks[r])
        if (is_recv(a.type)) {
          Channel& ch = chan_[channel(a.peer, r)];
          if (matching_p2p(send_type_[ch.first + ch.received++]) != a.type) report_unpaired();
        }
    for (Channel& ch : chan_) ch.posted = ch.received = 0;
    send_time_.resize(total);
  }

  // The message for an unpaired or mismatched channel, as the simulator has
  // always worded it (channels in hash order); only runs on a broken schedule.
  [[noreturn]] void report_unpaired() const {
    struct Pairing {
      std::vector<std::pair<int, int>> sends, recvs;  // (rank, position), in program order
    };
    std::unordered_map<std::uint64_t, Pairing> channels;
    for (int r = 0; r < pp_; ++r)
      for (int p = 0; p < static_cast<int>(s_.ranks[r].size()); ++p) {
        const Action& a = s_.ranks[r][p];
        if (!is_p2p(a.type)) continue;
        const bool send = is_send(a.type);
        const std::uint64_t from = send ? r : a.peer, to = send ? a.peer : r;
        Pairing& ch = channels[from * static_cast<std::uint64_t>(pp_) + to];
        (send ? ch.sends : ch.recvs).push_back({r, p});
      }
    for (auto& [k, ch] : channels) {
      const int from = static_cast<int>(k / pp_), to = static_cast<int>(k % pp_);
      if (ch.sends.size() != ch.recvs.size())
        cannot_run("rank " + std::to_string(from) + " posts " + std::to_string(ch.sends.size()) + " sends to rank " +
                   std::to_string(to) + ", which posts " + std::to_string(ch.recvs.size()) + " receives from it");
      for (size_t i = 0; i < ch.sends.size(); ++i) {
        const int sp = ch.sends[i].second, rp = ch.recvs[i].second;
        if (matching_p2p(s_.ranks[from][sp].type) != s_.ranks[to][rp].type)
          cannot_run(where(s_, from, sp) + " meets " + where(s_, to, rp) + " in FIFO order");
      }
    }
    throw std::logic_error("simulate: report_unpaired found every channel paired");
  }

  void pair_collectives() {
    std::vector<ActionType> ref;
    for (int r = 0; r < pp_; ++r) {
      std::vector<ActionType> mine;
      for (const Action& a : s_.ranks[r])
        if (is_collective(a.type)) mine.push_back(a.type);
      if (r == 0) ref = mine;
      if (mine != ref) cannot_run("rank " + std::to_string(r) + " posts different collectives from rank 0");
    }
    coll_arrived_.assign(ref.size(), 0);
    coll_start_.assign(ref.size(), 0.0);
  }

  double transfer(ActionType send) const {
    const double bytes = send == ActionType::MPIPE_GRAPH_SEND ? c_.preprocess_input_bytes : c_.activation_bytes;
    return c_.p2p_latency + (c_.p2p_bw > 0 ? bytes / c_.p2p_bw : 0.0);
  }

  double collective_time() const {
    if (c_.broadcast_bw <= 0 || s_.options.mpipe.frozen_preprocess) return 0.0;
    return c_.broadcast_bytes / c_.broadcast_bw;
  }

  // Rank time an action occupies once it can start (0 for pure communication).
  double duration(const Action& a) const {
    // Without MPipe steps the preprocess is simply the head of stage 0.
    const bool pre_inline = a.stage == 0 && !has_mpipe_;
    switch (a.type) {
      case ActionType::FWD: return c_.forward_time(a.stage) + (pre_inline ? c_.pre_f : 0.0);
      case ActionType::BWD: return c_.backward_time(a.stage) + (pre_inline ? c_.pre_b : 0.0);
      case ActionType::BWD_I: return c_.input_backward_time(a.stage) + (pre_inline ? c_.pre_b : 0.0);
      case ActionType::BWD_W: return c_.weight_backward_time(a.stage);
      case ActionType::MPIPE_TRANSPOSE_FWD: return c_.pre_f;
      case ActionType::MPIPE_TRANSPOSE_BWD: {
        const bool remote = a.micro >= 0 && a.micro < static_cast<int>(received_.size()) && received_[a.micro];
        return c_.pre_b + (remote ? (c_.recompute < 0 ? c_.pre_f : c_.recompute) : 0.0);
      }
      case ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD: return c_.pre_b;
      case ActionType::MPIPE_PARAM_BROADCAST:
      case ActionType::MPIPE_GRAD_REDUCE: return collective_time();
      default: return 0.0;
    }
  }

  void record(int r, const Action& a, double start, double end) {
    report_.ranks[r].timeline.push_back({a, start, end});
    report_.ranks[r].busy += end - start;
    rank_[r].t = end;
    ++rank_[r].pc;
  }

  // Rank r posts its send a at time t; wakes the receiver when it is parked
  // at this very message.
  void post(int r, const Action& a, double t) {
    const int c = channel(r, a.peer);
    Channel& ch = chan_[c];
    const int k = ch.posted++;
    send_time_[ch.first + k] = t;
    const int q = a.peer;
    const int pc = rank_[q].pc;
    if (ch.received == k && pc < static_cast<int>(s_.ranks[q].size())) {
      const Action& w = s_.ranks[q][pc];
      if (is_recv(w.type) && w.peer == r) work_.push_back(q);
    }
  }

  // Rank r joins collective k at time t.
  void arrive(int r, int k, double t) {
    coll_start_[k] = std::max(coll_start_[k], t);
    if (++coll_arrived_[k] == pp_)
      for (int q = 0; q < pp_; ++q)
        if (q != r) work_.push_back(q);
  }

  void advance(int r) {
    RankState& st = rank_[r];
    const auto& acts = s_.ranks[r];
    const int n = static_cast<int>(acts.size());
    while (st.pc < n) {
      ++report_.operations;
      const Action& a = acts[st.pc];
      const bool comm = is_comm(a.type);
      // A run of consecutive comms is posted as one batch (as the runtime and
      // validation do): its sends leave when the batch starts, even those
      // listed after a receive of the same batch.
      if (comm && st.pc >= st.posted_end) {
        int e = st.pc;
        for (; e < n && is_comm(acts[e].type); ++e) {
          if (is_send(acts[e].type)) post(r, acts[e], st.t);
          if (is_collective(acts[e].type)) arrive(r, st.collectives_joined++, st.t);
          if (acts[e].type == ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD) {
            ++e;
            break;
          }
        }
        st.posted_end = e;
      }
      if (is_send(a.type)) {
        // A send takes no rank time; its entry shows when it was posted.
        Channel& ch = chan_[channel(r, a.peer)];
        const double t = send_time_[ch.first + ch.recorded++];
        report_.ranks[r].timeline.push_back({a, t, t});
        ++st.pc;
      } else if (is_recv(a.type)) {
        Channel& ch = chan_[channel(a.peer, r)];
        if (ch.received == ch.posted) return;  // the send's poster wakes this rank
        const int k = ch.first + ch.received;
        const double start = std::max(st.t, send_time_[k] + transfer(send_type_[k]));
        ++ch.received;
        record(r, a, start, start + duration(a));
      } else if (is_collective(a.type)) {
        const int k = st.collectives_done;
        if (coll_arrived_[k] < pp_) return;  // the last rank to arrive wakes this one
        const double start = coll_start_[k], end = start + duration(a);
        report_.ranks[r].timeline.push_back({a, start, end});
        report_.ranks[r].busy += end - start;
        st.t = std::max(st.t, end);
        ++st.collectives_done;
        ++st.pc;
      } else {
        st.held.count(a.type, report_.ranks[r]);
        // Forward-only keeps no activation for a backward: one output at a time.
        if (s_.options.forward_only && a.type == ActionType::FWD) --st.held.active;
        record(r, a, st.t, st.t + duration(a));
      }
    }
  }

  [[noreturn]] void report_stuck() const {
    std::string msg = "deadlock:";
    for (int r = 0; r < pp_; ++r) {
      const int pc = rank_[r].pc;
      if (pc >= static_cast<int>(s_.ranks[r].size())) continue;
      msg += " " + where(s_, r, pc) + " waits";
      msg += is_collective(s_.ranks[r][pc].type) ? " for every rank;" : " for rank " + std::to_string(s_.ranks[r][pc].peer) + ";";
    }
    msg.pop_back();
    cannot_run(msg);
  }

  // Data parallelism: the rank's stages in the order their last backward ends
  // (the order GradReducer arms them), each cut into equal buckets that
  // become ready evenly through that backward, all reduced one after another
  // on the rank's link; then the preprocess's gradients, once the step's
  // compute is done. Returns when the last bucket is averaged.
  double grad_sync_end(const RankReport& rr) const {
    std::map<int, const TimedAction*> last_b;
    // A split backward's weights are final after its W.
    for (const TimedAction& t : rr.timeline)
      if (t.action.type == ActionType::BWD || t.action.type == ActionType::BWD_W) last_b[t.action.stage] = &t;
    std::vector<const TimedAction*> phases;
    for (const auto& [stage, t] : last_b) phases.push_back(t);
    std::sort(phases.begin(), phases.end(), [](const TimedAction* x, const TimedAction* y) { return x->end < y->end; });
    double link = 0.0;
    auto reduce = [&](double bytes, double start, double end) {
      if (bytes <= 0) return;
      const int n = static_cast<int>(std::ceil(bytes / c_.bucket_bytes));
      for (int i = 0; i < n; ++i) {
        const double ready = start + (end - start) * (i + 1) / n;
        link = std::max(link, ready) + all_reduce_time(bytes / n, c_.dp, c_.dp_latency, c_.dp_bw);
      }
    };
    for (const TimedAction* t : phases) reduce(c_.stage(t->action.stage).grad_bytes, t->start, t->end);
    reduce(c_.pre_grad_bytes, rr.compute_end, rr.compute_end);
    return link;
  }

  void summarize() {
    for (int r = 0; r < pp_; ++r) {
      RankReport& rr = report_.ranks[r];
      rr.compute_end = rank_[r].t;
      if (c_.dp > 1) rr.grad_sync_end = grad_sync_end(rr);
      report_.step_time = std::max({report_.step_time, rr.compute_end, rr.grad_sync_end});
    }
    double idle = 0.0;
    for (RankReport& rr : report_.ranks) {
      rr.idle = report_.step_time - rr.busy;
      idle += rr.idle;
    }
    report_.bubble_fraction = report_.step_time > 0 ? idle / (pp_ * report_.step_time) : 0.0;
  }

  const Schedule& s_;
  const CostModel& c_;
  const int pp_;
  bool has_mpipe_ = false;
  std::vector<char> received_;  // micro -> rank 0 received its preprocess output
  ChannelIndex channels_;
  std::vector<Channel> chan_;          // by channel id
  std::vector<ActionType> send_type_;  // per message: its send's type (sets the transfer time)
  std::vector<double> send_time_;      // per posted message: when it was sent
  std::vector<int> coll_arrived_;
  std::vector<double> coll_start_;
  std::vector<RankState> rank_;
  std::vector<int> work_;
  SimulationReport report_;
};

}  // namespace

void CostModel::validate() const {
  auto check = [](const std::string& name, double v, bool any_sign) {
    if (!std::isfinite(v) || (!any_sign && v < 0))
      throw std::invalid_argument("costs." + name + " must be a finite number" + (any_sign ? "" : " >= 0") +
                                  ", got " + std::to_string(v));
  };
  check("f", f, false);
  check("b", b, false);
  check("i", i, true);
  check("w", w, true);
  check("pre_f", pre_f, false);
  check("pre_b", pre_b, false);
  check("recompute", recompute, true);
  check("broadcast_bytes", broadcast_bytes, false);
  check("broadcast_bw", broadcast_bw, false);
  check("p2p_latency", p2p_latency, false);
  check("p2p_bw", p2p_bw, false);
  check("activation_bytes", activation_bytes, false);
  check("preprocess_input_bytes", preprocess_input_bytes, false);
  check("tp_latency", tp_latency, false);
  check("tp_bw", tp_bw, false);
  check("dp_latency", dp_latency, false);
  check("dp_bw", dp_bw, false);
  check("pre_grad_bytes", pre_grad_bytes, false);
  if (tp < 1 || dp < 1)
    throw std::invalid_argument("costs.tp and costs.dp must be >= 1, got " + std::to_string(tp) + " and " +
                                std::to_string(dp));
  if (!std::isfinite(bucket_bytes) || bucket_bytes <= 0)
    throw std::invalid_argument("costs.bucket_bytes must be a finite number > 0, got " + std::to_string(bucket_bytes));
  for (const auto& [stage, c] : per_stage) {
    const std::string name = "per_stage[" + std::to_string(stage) + "].";
    check(name + "f", c.f, false);
    check(name + "b", c.b, false);
    check(name + "i", c.i, true);
    check(name + "w", c.w, true);
    check(name + "grad_bytes", c.grad_bytes, false);
    for (const auto& [part, coll] : {std::pair{"tp_f", c.tp_f}, std::pair{"tp_b", c.tp_b}}) {
      check(name + part + ".bytes", coll.bytes, false);
      if (coll.calls < 0)
        throw std::invalid_argument("costs." + name + part + ".calls must be >= 0, got " + std::to_string(coll.calls));
    }
  }
}

SimulationReport simulate(const Schedule& s, const CostModel& costs) {
  costs.validate();
  return Simulator(s, costs).run();
}

double time_in(const SimulationReport& report, int rank, ActionType type) {
  double t = 0;
  for (const auto& a : report.ranks.at(rank).timeline)
    if (a.action.type == type) t += a.end - a.start;
  return t;
}

}  // namespace hp::schedule
