#include "schedule/body_order.hpp"

#include <algorithm>
#include <deque>

#include "schedule/generate.hpp"

namespace hp::schedule {
namespace {

Action fwd(int stage, int micro) { return Action{ActionType::FWD, stage, micro, -1}; }
Action bwd(int stage, int micro) { return Action{ActionType::BWD, stage, micro, -1}; }
Action bwd_input(int stage, int micro) { return Action{ActionType::BWD_I, stage, micro, -1}; }
Action bwd_weight(int stage, int micro) { return Action{ActionType::BWD_W, stage, micro, -1}; }

}  // namespace

ComputeOrder no_pipelining_order(const ScheduleOptions& o) {
  ComputeOrder out(1);
  out[0].reserve(2 * static_cast<size_t>(o.micro_batches));
  for (int m = 0; m < o.micro_batches; ++m) {
    out[0].push_back(fwd(0, m));
    out[0].push_back(bwd(0, m));
  }
  return out;
}

ComputeOrder gpipe_order(const ScheduleOptions& o) {
  ComputeOrder out(o.pp);
  for (int r = 0; r < o.pp; ++r) {
    out[r].reserve(2 * static_cast<size_t>(o.micro_batches));
    for (int m = 0; m < o.micro_batches; ++m) out[r].push_back(fwd(r, m));
    for (int m = 0; m < o.micro_batches; ++m) out[r].push_back(bwd(r, m));
  }
  return out;
}

ComputeOrder one_f_one_b_order(const ScheduleOptions& o) {
  const int mb = o.micro_batches;
  ComputeOrder out(o.pp);
  for (int r = 0; r < o.pp; ++r) {
    const int warmup = std::min(o.pp - r - 1, mb);
    auto& ops = out[r];
    ops.reserve(2 * static_cast<size_t>(mb));
    for (int m = 0; m < warmup; ++m) ops.push_back(fwd(r, m));
    for (int i = 0; i + warmup < mb; ++i) {
      ops.push_back(fwd(r, warmup + i));
      ops.push_back(bwd(r, i));
    }
    for (int i = mb - warmup; i < mb; ++i) ops.push_back(bwd(r, i));
  }
  return out;
}

// Every rank walks the same table; backward op k runs table entry k with the
// chunk order reversed, so the last chunk's gradient flows back first.
ComputeOrder interleaved_order(const ScheduleOptions& o) {
  const int v = o.vpp;
  const std::vector<MicroChunk> table =
      interleaved_table(o.micro_batches, v, o.effective_group_size());
  const int total = static_cast<int>(table.size());
  ComputeOrder out(o.pp);
  for (int r = 0; r < o.pp; ++r) {
    auto f = [&](int k) { return fwd(table[k].chunk * o.pp + r, table[k].micro); };
    auto b = [&](int k) { return bwd((v - 1 - table[k].chunk) * o.pp + r, table[k].micro); };
    const int warmup = interleaved_warmup(o, r);
    auto& ops = out[r];
    ops.reserve(2 * static_cast<size_t>(total));
    for (int k = 0; k < warmup; ++k) ops.push_back(f(k));
    for (int i = 0; warmup + i < total; ++i) {
      ops.push_back(f(warmup + i));
      ops.push_back(b(i));
    }
    for (int i = total - warmup; i < total; ++i) ops.push_back(b(i));
  }
  return out;
}

// Zero-bubble 1P (ZB-H1 at v 1; PyTorch's ScheduleInterleavedZeroBubble):
// the interleaved table with a shallower warm-up, (v-1)*G + PP-1-rank
// forwards, then F and I alternate, and rank r holds back the W of its
// first r I's: each later I is followed by the W of the oldest I still
// without one (so rank 0 runs every W at once, the last rank lags PP-1), and
// the held-back W's close the step, where they fill what was the cool-down's
// bubble. Where PyTorch accepts the layout (MB a multiple of its rounds,
// max(1, MB / PP)) G is its micro-batches per round and the orders are
// PyTorch's, rank by rank; the table's groups also take the MB it refuses.
ComputeOrder zero_bubble_1p_order(const ScheduleOptions& o) {
  const int v = o.vpp, g = o.effective_group_size();
  const std::vector<MicroChunk> table = interleaved_table(o.micro_batches, v, g);
  const int total = static_cast<int>(table.size());
  ComputeOrder out(o.pp);
  for (int r = 0; r < o.pp; ++r) {
    auto stage_f = [&](int k) { return table[k].chunk * o.pp + r; };
    auto stage_b = [&](int k) { return (v - 1 - table[k].chunk) * o.pp + r; };
    const int warmup = std::min((v - 1) * g + o.pp - 1 - r, total);
    auto& ops = out[r];
    ops.reserve(3 * static_cast<size_t>(total));
    int next_w = 0;  // table entry of the oldest I whose W has not run
    auto input_backward = [&](int i) {
      ops.push_back(bwd_input(stage_b(i), table[i].micro));
      if (i >= r) {
        ops.push_back(bwd_weight(stage_b(next_w), table[next_w].micro));
        ++next_w;
      }
    };
    for (int k = 0; k < warmup; ++k) ops.push_back(fwd(stage_f(k), table[k].micro));
    for (int i = 0; i < total; ++i) {
      if (warmup + i < total) ops.push_back(fwd(stage_f(warmup + i), table[warmup + i].micro));
      input_backward(i);
    }
    for (; next_w < total; ++next_w) ops.push_back(bwd_weight(stage_b(next_w), table[next_w].micro));
  }
  return out;
}

// PyTorch's ScheduleZBVZeroBubble, rank by rank, in V placement: chunk 0 is
// stage r, chunk 1 stage 2PP-1-r. Warm-up: 2(PP-r)-1 chunk-0 forwards, r
// pairs of chunk-1 and chunk-0 forwards, then PP-r rounds of a chunk-1
// forward with its I and W at once. Steady: a chunk-0 F, I, W and a chunk-1
// F, I, W per round. Cool-down: r pairs of I's with the W's held back, PP-r
// chunk-0 I's each with the oldest chunk-0 W, then every held-back W, chunk 1's
// first. PyTorch plans at least 2PP-1 micro-batches and drops the actions of
// those beyond MB; so does this, which keeps its orders at any MB.
ComputeOrder zero_bubble_v_order(const ScheduleOptions& o) {
  const int pp = o.pp, mb = o.micro_batches, planned = std::max(2 * pp - 1, mb);
  ComputeOrder out(pp);
  for (int r = 0; r < pp; ++r) {
    const int s0 = o.stage_of(r, 0), s1 = o.stage_of(r, 1);
    auto& ops = out[r];
    ops.reserve(6 * static_cast<size_t>(planned));
    auto add = [&](Action a) {
      if (a.micro < mb) ops.push_back(a);
    };
    int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
    for (int i = 0; i < 2 * (pp - r) - 1; ++i) add(fwd(s0, f0++));
    for (int i = 0; i < r; ++i) {
      add(fwd(s1, f1++));
      add(fwd(s0, f0++));
    }
    for (int i = 0; i < pp - r; ++i) {
      add(fwd(s1, f1++));
      add(bwd_input(s1, b1));
      add(bwd_weight(s1, b1++));
    }
    while (f1 < f0 || f0 < planned) {
      if (f0 < planned) add(fwd(s0, f0++));
      add(bwd_input(s0, b0));
      add(bwd_weight(s0, b0++));
      add(fwd(s1, f1++));
      add(bwd_input(s1, b1));
      add(bwd_weight(s1, b1++));
    }
    int w0 = b0, w1 = b1;
    for (int i = 0; i < r; ++i) {
      add(bwd_input(s0, b0++));
      add(bwd_input(s1, b1++));
    }
    for (int i = 0; i < pp - r; ++i) {
      add(bwd_input(s0, b0++));
      add(bwd_weight(s0, w0++));
    }
    while (w1 < b1) add(bwd_weight(s1, w1++));
    while (w0 < b0) add(bwd_weight(s0, w0++));
  }
  return out;
}

// PyTorch's ScheduleDualPipeV (DeepSeek's dualpipev.py), rank by rank, in V
// placement, for MB >= 2PP. Warm-up: 2(PP-1-r) chunk-0 forwards, r+1 pairs of
// chunk-0 and chunk-1 forwards, PP-1-r rounds of a chunk-1 I, the oldest
// pending W and a chunk-1 F. Steady: MB-2PP+r+1 rounds of two overlapped
// pairs, (F chunk 0; B chunk 1) then (F chunk 1; B chunk 0), the last rank's
// first (F; B) run apart; then PP-1-r rounds of a chunk-1 B and the pair
// (F chunk 1; B chunk 0). Cool-down: r+1 rounds of a chunk-1 and a chunk-0
// backward, whole in the first half and split into I from its middle on,
// then PP-1-r rounds of a pending W and a chunk-0 backward, then the pending
// W's, oldest first.
ComputeOrder dualpipe_v_order(const ScheduleOptions& o) {
  const int pp = o.pp, mb = o.micro_batches;
  ComputeOrder out(pp);
  for (int r = 0; r < pp; ++r) {
    const int st[2] = {o.stage_of(r, 0), o.stage_of(r, 1)};
    int next_f[2] = {0, 0}, next_b[2] = {0, 0};  // per chunk, the next forward's and input backward's micro
    std::deque<Action> pending_w;                 // the W of every I not yet followed by it, oldest first
    auto& ops = out[r];
    ops.reserve(4 * static_cast<size_t>(mb));
    auto f = [&](int c) { ops.push_back(fwd(st[c], next_f[c]++)); };
    auto b = [&](int c) { ops.push_back(bwd(st[c], next_b[c]++)); };
    auto i = [&](int c) {
      ops.push_back(bwd_input(st[c], next_b[c]));
      pending_w.push_back(bwd_weight(st[c], next_b[c]++));
    };
    auto w = [&] {
      if (pending_w.empty()) return;
      ops.push_back(pending_w.front());
      pending_w.pop_front();
    };
    auto pair = [&](int fc, int bc) {
      f(fc);
      ops.back().overlap = true;
      b(bc);
    };
    for (int k = 0; k < 2 * (pp - 1 - r); ++k) f(0);
    for (int k = 0; k <= r; ++k) f(0), f(1);
    for (int k = 0; k < pp - 1 - r; ++k) i(1), w(), f(1);
    for (int k = 0; k < mb - 2 * pp + r + 1; ++k) {
      if (k == 0 && r == pp - 1)
        f(0), b(1);
      else
        pair(0, 1);
      pair(1, 0);
    }
    for (int k = 0; k < pp - 1 - r; ++k) b(1), pair(1, 0);
    bool split = false;
    const int half = (r + 1) / 2;
    for (int k = 0; k <= r; ++k) {
      if (k == half && r % 2 == 1) split = true;
      split ? i(1) : b(1);
      if (k == half && r % 2 == 0) split = true;
      split ? i(0) : b(0);
    }
    for (int k = 0; k < pp - 1 - r; ++k) w(), i(0);
    while (!pending_w.empty()) w();
  }
  return out;
}

std::vector<MicroChunk> interleaved_table(int micro_batches, int vpp, int group) {
  std::vector<MicroChunk> table;
  table.reserve(static_cast<size_t>(micro_batches) * vpp);
  for (int g0 = 0; g0 < micro_batches; g0 += group) {
    const int end = std::min(g0 + group, micro_batches);
    for (int c = 0; c < vpp; ++c)
      for (int m = g0; m < end; ++m) table.push_back({m, c});
  }
  return table;
}

int interleaved_warmup(const ScheduleOptions& o, int rank) {
  const int w = (o.vpp - 1) * o.effective_group_size() + 2 * (o.pp - 1 - rank);
  return std::min(w, o.vpp * o.micro_batches);
}

namespace {

ComputeOrder training_order(const ScheduleOptions& o) {
  if (o.kind == ScheduleKind::MPipe) {
    ScheduleOptions body = o;
    body.kind = o.mpipe.body;
    return training_order(body);
  }
  return schedule_row(o.kind).order(o);
}

}  // namespace

std::vector<std::vector<Action>> body_compute_order(const ScheduleOptions& o) {
  check_options(o);
  ComputeOrder order = training_order(o);
  // Forward-only keeps each rank's forwards in the training order: the
  // interleaved table still decides which chunk runs next.
  if (o.forward_only)
    for (auto& ops : order) {
      ops.erase(std::remove_if(ops.begin(), ops.end(), [](const Action& a) { return is_backward(a.type); }),
                ops.end());
      for (Action& a : ops) a.overlap = false;
    }
  return order;
}

}  // namespace hp::schedule
