// generate_mpipe (declared in generate.hpp): spec section 4 and DESIGN.md
// "Resolved points of the MPipe spec". The body is the schedule MPipeOptions::
// body names (interleaved, as the spec builds it, 1F1B or GPipe) with its
// comms, untouched; every MPIPE_* step is layered around it:
//   prefix  broadcast, the owner's transposed forwards and their transport;
//   body    rank 0 only: inline forwards of "min" overflow micros before
//           FWD(0, m), MPIPE_TRANSPOSE_BWD(m) right after BWD(0, m);
//   suffix  owner-backward gradient transport, then the gradient all-reduce.
// The prefix sends precede every body comm on both sides of each rank pair,
// and the suffix follows them, so pairwise FIFO of the body carries over.
#include "schedule/comm_insert.hpp"
#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

Action mpipe(ActionType t, int micro = -1, int peer = -1) { return Action{t, 0, micro, peer}; }

}  // namespace

Schedule generate_mpipe(const ScheduleOptions& options) {
  ScheduleOptions o = options;
  o.kind = ScheduleKind::MPipe;
  check_options(o);
  ScheduleOptions body_opts = o;
  body_opts.kind = o.mpipe.body;
  const BodyComms body(body_opts, body_compute_order(body_opts));

  const MPipeOptions& mp = o.mpipe;
  const int mb = o.micro_batches;
  const bool has_preprocess = mp.transpose_layers > 0;
  // Forward-only: nothing is backpropagated, so nothing of the backward is shipped.
  const bool trainable = has_preprocess && !mp.frozen_preprocess && !o.forward_only;
  // Under owner-backward the owner keeps its graph, so its input stays home.
  const bool ship_graph = trainable && !mp.owner_backward;
  auto owner = [&](int m) { return mpipe_owner(o, m); };
  // "min" overflow micros are transposed inline on rank 0, not in the prefix.
  auto inline_on_rank0 = [&](int m) { return mpipe_inline_on_rank0(o, m); };

  Schedule s;
  s.options = o;
  s.ranks.resize(o.pp);
  for (int r = 0; r < o.pp; ++r) {
    auto& out = s.ranks[r];
    // At most: the broadcast, three prefix steps and two body steps per micro
    // (rank 0), the suffix's one per micro and the reduce.
    out.reserve(body.size(r) + 6 * static_cast<size_t>(mb) + 2);
    // Prefix.
    if (has_preprocess) out.push_back(mpipe(ActionType::MPIPE_PARAM_BROADCAST));
    if (r > 0) {
      for (int m = 0; m < mb; ++m) {
        if (owner(m) != r) continue;
        out.push_back(mpipe(ActionType::MPIPE_TRANSPOSE_FWD, m));
        out.push_back(mpipe(ActionType::MPIPE_FWD_SEND, m, 0));
      }
      if (ship_graph)
        for (int m = 0; m < mb; ++m)
          if (owner(m) == r) out.push_back(mpipe(ActionType::MPIPE_GRAPH_SEND, m, 0));
    } else {
      for (int m = 0; m < mb; ++m)
        if (owner(m) == 0 && !inline_on_rank0(m)) out.push_back(mpipe(ActionType::MPIPE_TRANSPOSE_FWD, m));
      for (int m = 0; m < mb; ++m)
        if (owner(m) != 0) out.push_back(mpipe(ActionType::MPIPE_FWD_RECV, m, owner(m)));
      if (ship_graph)
        for (int m = 0; m < mb; ++m)
          if (owner(m) != 0) out.push_back(mpipe(ActionType::MPIPE_GRAPH_RECV, m, owner(m)));
    }
    // Body. Stage 0 runs on rank 0 only, so the other ranks take theirs as is.
    if (r > 0) {
      body.append(r, out);
    } else {
      std::vector<Action> rank0;
      rank0.reserve(body.size(0));
      body.append(0, rank0);
      for (const Action& a : rank0) {
        const bool stage0 = a.stage == 0;
        if (stage0 && a.type == ActionType::FWD && inline_on_rank0(a.micro))
          out.push_back(mpipe(ActionType::MPIPE_TRANSPOSE_FWD, a.micro));
        out.push_back(a);
        if (stage0 && is_input_backward(a.type) && trainable && (!mp.owner_backward || owner(a.micro) == 0))
          out.push_back(mpipe(ActionType::MPIPE_TRANSPOSE_BWD, a.micro));
      }
    }
    // Owner-backward suffix.
    if (!mp.owner_backward || o.forward_only) continue;
    for (int m = 0; m < mb; ++m) {
      if (r == 0 && owner(m) != 0) out.push_back(mpipe(ActionType::MPIPE_GRAD_SEND, m, owner(m)));
      if (r > 0 && owner(m) == r) out.push_back(mpipe(ActionType::MPIPE_GRAD_RECV_WITH_BACKWARD, m, 0));
    }
    out.push_back(mpipe(ActionType::MPIPE_GRAD_REDUCE));
  }
  return s;
}

}  // namespace hp::schedule
