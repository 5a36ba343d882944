// One rank of the comm dist tests: `comm_worker SCENARIO[,SCENARIO...]`,
// started by launch_local (p2p_dist_test.cpp). It reads the torchrun
// environment, forms the group with the timeout HP_TIMEOUT_S (seconds,
// default 20), runs the scenarios in order on that one group and prints
// "rank R: SCENARIO ok" after each. Any failure prints
// "rank R: FAILED: <message>" to stderr and exits 1.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cstdint>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/dist_env.hpp"
#include "comm/mesh.hpp"
#include "comm/p2p.hpp"
#include "comm/process_group.hpp"
#include "rank_program.hpp"

using namespace hp::comm;
using hp::testing::check;
using hp::testing::say;

namespace {

void check_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  check(got.defined(), what + ": undefined tensor");
  check(got.scalar_type() == want.scalar_type(),
        what + ": dtype " + std::string(c10::toString(got.scalar_type())) + " != " +
            std::string(c10::toString(want.scalar_type())));
  check(got.sizes() == want.sizes(), what + ": shape differs");
  check(at::equal(got, want), what + ": values differ");
}

// Distinct values per (rank, micro, kind) so any mix-up is visible.
at::Tensor payload(int from, int micro, double kind_sign, at::IntArrayRef shape,
                   at::ScalarType dtype = at::kDouble) {
  at::Tensor base = at::arange(c10::multiply_integers(shape), at::kDouble).reshape(shape);
  return (kind_sign * (base + 1000.0 * from + 100.0 * micro)).to(dtype);
}

using Scenario = std::function<void(ProcessGroup&, P2P&)>;

// Ring: every rank sends K activations to the next rank and K gradients to
// the previous one, all posted before any wait, waited in reverse order.
void ring(ProcessGroup& pg, P2P& p2p) {
  const int r = pg.rank(), n = pg.world_size();
  const int next = (r + 1) % n, prev = (r - 1 + n) % n;
  const int K = 4;
  const std::vector<int64_t> shape = {3, 5};
  std::vector<at::Tensor> act_in, grad_in;
  std::vector<Work> recvs, sends;
  for (int m = 0; m < K; ++m) {
    act_in.push_back(at::full(shape, -1.0, at::kDouble));
    grad_in.push_back(at::full(shape, -1.0, at::kDouble));
    recvs.push_back(p2p.irecv(act_in.back(), prev, MessageKind::Activation, prev, m));
    recvs.push_back(p2p.irecv(grad_in.back(), next, MessageKind::Gradient, next, m));
  }
  for (int m = 0; m < K; ++m) {
    sends.push_back(p2p.isend(payload(r, m, 1.0, shape), next, MessageKind::Activation, r, m));
    sends.push_back(p2p.isend(payload(r, m, -1.0, shape), prev, MessageKind::Gradient, r, m));
  }
  for (int i = static_cast<int>(recvs.size()) - 1; i >= 0; --i) recvs[i].wait();
  for (int m = 0; m < K; ++m) {
    check_equal(act_in[m], payload(prev, m, 1.0, shape), "activation " + std::to_string(m));
    check_equal(grad_in[m], payload(next, m, -1.0, shape), "gradient " + std::to_string(m));
  }
  wait_all(sends);
  const std::uint64_t bytes = 2ull * K * 15 * sizeof(double);
  check(pg.bytes_sent() == bytes, "bytes_sent " + std::to_string(pg.bytes_sent()) + " != " + std::to_string(bytes));
  check(pg.bytes_received() == bytes, "bytes_received " + std::to_string(pg.bytes_received()));
  check(pg.counters().messages_sent == 2u * K, "messages_sent");

  // Non-contiguous on both sides: send a transposed view, receive into one.
  at::Tensor src = payload(r, 9, 1.0, {4, 6}).t();  // [6, 4], not contiguous
  at::Tensor dst_base = at::zeros({4, 6}, at::kDouble);
  at::Tensor dst = dst_base.t();
  Work rw = p2p.irecv(dst, prev, MessageKind::Activation, prev, 9);
  Work sw = p2p.isend(src, next, MessageKind::Activation, r, 9);
  rw.wait();
  sw.wait();
  check_equal(dst, payload(prev, 9, 1.0, {4, 6}).t(), "non-contiguous receive");
  check(rw.tensor().data_ptr() == dst.data_ptr(), "Work::tensor() is the destination");
  check(rw.is_completed() && sw.is_completed() && Work().is_completed(), "is_completed after wait");

  // Pseudo-deallocation: the sender swaps the output's storage for a
  // one-element tensor right after posting; the message must still carry the
  // original values.
  at::Tensor out = payload(r, 11, 1.0, {64, 32});
  at::Tensor in = at::zeros({64, 32}, at::kDouble);
  Work rin = p2p.irecv(in, prev, MessageKind::Activation, prev, 11);
  Work sout = p2p.isend(out, next, MessageKind::Activation, r, 11);
  out.set_data(at::empty({1}, out.options()));
  // Reuse freed memory of that size, so a send reading released storage
  // would carry these values instead.
  std::vector<at::Tensor> junk;
  for (int i = 0; i < 8; ++i) junk.push_back(at::full({64, 32}, -7.0, at::kDouble));
  rin.wait();
  sout.wait();
  check(out.numel() == 1, "pseudo-deallocated");
  check_equal(in, payload(prev, 11, 1.0, {64, 32}), "values sent from a pseudo-deallocated output");
}

// PP=2 with two chunks per rank: rank 1 owns stages 1 and 3, rank 0 stages
// 0 and 2. Rank 1 sends stage 1's activation (to stage 2) and stage 1's input
// gradient (to stage 0) for the same micro, both to rank 0, at the same time;
// rank 0 likewise sends stage 2's activation and gradient to rank 1. Same
// shapes and dtypes: only the tags keep them apart. Posted in both orders,
// raw and batched.
void pp2_hazard(ProcessGroup& pg, P2P& p2p) {
  check(pg.world_size() == 2, "pp2_hazard needs 2 ranks");
  const int r = pg.rank(), peer = 1 - r;
  const int my_stage = r == 1 ? 1 : 2, peer_stage = r == 1 ? 2 : 1;
  const std::vector<int64_t> shape = {2, 8};
  for (int round = 0; round < 4; ++round) {
    const int m = round;
    at::Tensor act_in = at::zeros(shape, at::kDouble), grad_in = at::zeros(shape, at::kDouble);
    at::Tensor act_out = payload(r, m, 1.0, shape), grad_out = payload(r, m, -1.0, shape);
    std::vector<Work> works;
    const bool backward_first = (round % 2 == 1) != (r == 1);  // the two ranks post in opposite orders
    if (round < 2) {
      auto post_fwd = [&] {
        works.push_back(p2p.isend(act_out, peer, MessageKind::Activation, my_stage, m));
        works.push_back(p2p.irecv(act_in, peer, MessageKind::Activation, peer_stage, m));
      };
      auto post_bwd = [&] {
        works.push_back(p2p.irecv(grad_in, peer, MessageKind::Gradient, peer_stage, m));
        works.push_back(p2p.isend(grad_out, peer, MessageKind::Gradient, my_stage, m));
      };
      if (backward_first) {
        post_bwd();
        post_fwd();
      } else {
        post_fwd();
        post_bwd();
      }
    } else {
      std::vector<P2POp> ops;
      ops.push_back(P2POp::recv(grad_in, peer, MessageKind::Gradient, peer_stage, m));
      ops.push_back(P2POp::send(grad_out, peer, MessageKind::Gradient, my_stage, m));
      ops.push_back(P2POp::send(act_out, peer, MessageKind::Activation, my_stage, m));
      ops.push_back(P2POp::recv(act_in, peer, MessageKind::Activation, peer_stage, m));
      if (backward_first) std::reverse(ops.begin(), ops.end());
      works = p2p.batch_isend_irecv(ops);
      check(works.size() == 4, "one handle per op");
    }
    wait_all(works);
    check_equal(act_in, payload(peer, m, 1.0, shape), "activation round " + std::to_string(round));
    check_equal(grad_in, payload(peer, m, -1.0, shape), "gradient round " + std::to_string(round));
  }
}

void broadcast(ProcessGroup& pg, P2P&) {
  const int r = pg.rank(), n = pg.world_size(), root = n - 1;
  auto make = [&](bool is_root) {
    double f = is_root ? 1.0 : 0.0;
    std::vector<at::Tensor> v;
    v.push_back(is_root ? at::arange(12, at::kFloat).reshape({3, 4}) : at::full({3, 4}, -1.f));
    v.push_back(is_root ? at::full({5}, 1.0 / 3.0, at::kDouble) : at::zeros({5}, at::kDouble));
    v.push_back(is_root ? at::arange(4, at::kLong).reshape({2, 2}) * 7 : at::zeros({2, 2}, at::kLong));
    v.push_back((at::arange(12, at::kFloat).reshape({3, 4}) * f + 50.f * (1 - f)).t());  // non-contiguous
    v.push_back(at::zeros({0, 3}));
    return v;
  };
  std::vector<at::Tensor> mine = make(r == root), want = make(true);
  pg.broadcast(mine, root);
  for (std::size_t i = 0; i < mine.size(); ++i) check_equal(mine[i], want[i], "broadcast tensor " + std::to_string(i));
  // One contiguous tensor from rank 0 (the in-place path), asynchronously.
  at::Tensor x = r == 0 ? at::arange(7, at::kDouble) : at::zeros({7}, at::kDouble);
  Work w = pg.ibroadcast({x}, 0);
  w.wait();
  check_equal(x, at::arange(7, at::kDouble), "ibroadcast");
}

void all_reduce(ProcessGroup& pg, P2P&) {
  const int r = pg.rank(), n = pg.world_size();
  pg.reset_counters();
  at::Tensor x = at::arange(10, at::kDouble) * (r + 1) / 3.0;
  pg.all_reduce(x);
  at::Tensor want = at::arange(10, at::kDouble) * (n * (n + 1) / 2) / 3.0;
  check(at::allclose(x, want, 1e-14, 0), "sum of doubles");
  at::Tensor mx = at::full({3}, static_cast<double>(r), at::kFloat);
  pg.all_reduce(mx, ReduceOp::Max);
  check_equal(mx, at::full({3}, static_cast<double>(n - 1), at::kFloat), "max");
  at::Tensor mn = at::full({3}, static_cast<double>(r + 5), at::kLong);
  pg.all_reduce(mn, ReduceOp::Min);
  check_equal(mn, at::full({3}, 5, at::kLong), "min");
  at::Tensor base = at::ones({3, 4}, at::kFloat) * (r + 1);
  at::Tensor t = base.t();
  pg.all_reduce(t);
  check_equal(base, at::ones({3, 4}, at::kFloat) * (n * (n + 1) / 2), "non-contiguous sum");
  Work w = pg.iall_reduce(at::ones({2}, at::kLong));
  w.wait();
  // The four blocking calls are counted, with their bytes and some time; the posted one is not.
  const CommCounters c = pg.counters();
  check(c.all_reduces == 4u, "all_reduces counted: " + std::to_string(c.all_reduces));
  check(c.all_reduce_bytes == 10u * 8 + 3 * 4 + 3 * 8 + 12 * 4, "all_reduce bytes: " + std::to_string(c.all_reduce_bytes));
  check(c.all_reduce_us > 0, "all_reduce time");
  pg.barrier();
}

// A chain 0 -> 1 -> ... -> n-1 of variable-shape activations, each rank adding
// one, then the gradients back, with meta messages.
void meta(ProcessGroup& pg, P2P& p2p) {
  const int r = pg.rank(), n = pg.world_size();
  const at::ScalarType dtypes[] = {at::kDouble, at::kFloat, at::kLong, at::kBFloat16};
  auto shape_of = [](int m) -> std::vector<int64_t> {
    if (m == 6) return {};       // a scalar
    if (m == 7) return {0, 4};   // empty
    return {1 + (m * 3) % 7, 2, 3};
  };
  const int M = 8;
  for (int m = 0; m < M; ++m) {
    at::ScalarType dt = dtypes[m % 4];
    at::Tensor x;
    if (r == 0) {
      x = payload(0, m, 1.0, shape_of(m), dt);
    } else {
      x = p2p.recv_with_meta(r - 1, MessageKind::Activation, r - 1, m);
      check(x.scalar_type() == dt, "received dtype for micro " + std::to_string(m));
      check(x.sizes() == at::IntArrayRef(shape_of(m)), "received shape for micro " + std::to_string(m));
      check_equal(x, (payload(0, m, 1.0, shape_of(m), dt) + (r - 1)).to(dt), "activation " + std::to_string(m));
      x = (x + 1).to(dt);
    }
    if (r + 1 < n) p2p.isend_with_meta(x, r + 1, MessageKind::Activation, r, m).wait();
  }
  // Backward, batched: receive from r+1 with meta, send to r-1 with meta.
  for (int m = 0; m < M; ++m) {
    at::ScalarType dt = dtypes[m % 4];
    at::Tensor g;
    if (r == n - 1) {
      g = payload(n - 1, m, -1.0, shape_of(m), dt);
    } else {
      std::vector<Work> w = p2p.batch_isend_irecv({P2POp::recv_with_meta(r + 1, MessageKind::Gradient, r + 1, m)});
      w[0].wait();
      g = w[0].tensor();
      check_equal(g, payload(n - 1, m, -1.0, shape_of(m), dt), "gradient " + std::to_string(m));
    }
    if (r > 0) {
      std::vector<Work> w = p2p.batch_isend_irecv({P2POp::send(g, r - 1, MessageKind::Gradient, r, m, true)});
      wait_all(w);
    }
  }
  // Meta bytes are counted: every message is 10 int64 of meta plus the data.
  if (r == 0) check(pg.counters().messages_sent == static_cast<std::uint64_t>(M + M - 1), "rank 0 sends");
}

void dtypes(ProcessGroup& pg, P2P& p2p) {
  check(pg.world_size() == 2, "dtypes needs 2 ranks");
  const int r = pg.rank();
  at::Tensor d = at::tensor({1.0 / 3.0, 1e-300, -0.0, std::nan(""), INFINITY, 2.0 / 7.0}, at::kDouble);
  std::vector<at::Tensor> values = {
      d,
      d.to(at::kFloat),
      d.to(at::kHalf),
      d.to(at::kBFloat16),
      at::tensor({1, 0, 1}, at::kByte).to(at::kBool),
      at::tensor({0, 255, 7}, at::kByte),
      at::tensor({INT64_MIN, INT64_MAX, int64_t{0}}, at::kLong),
      at::tensor({-5, 6}, at::kInt),
  };
  for (std::size_t i = 0; i < values.size(); ++i) {
    const int micro = static_cast<int>(i);
    if (r == 0) {
      p2p.isend(values[i], 1, MessageKind::MPipeFeature, 0, micro).wait();
    } else {
      at::Tensor got = at::empty_like(values[i]);
      p2p.irecv(got, 0, MessageKind::MPipeFeature, 0, micro).wait();
      // Bit-exact (NaN included): compare the raw bytes.
      at::Tensor a = got.view(at::kByte), b = values[i].view(at::kByte);
      check(at::equal(a, b), std::string("bit-exact ") + c10::toString(values[i].scalar_type()));
    }
  }
}

// The last rank leaves right after the group is formed; the others then
// receive from it and must fail quickly, naming it.
void early_exit(ProcessGroup& pg, P2P& p2p) {
  const int r = pg.rank(), n = pg.world_size();
  pg.barrier();
  if (r == n - 1) {
    say(r, "leaving early");
    std::_Exit(0);
  }
  at::Tensor x = at::zeros({4});
  p2p.irecv(x, n - 1, MessageKind::Activation, n - 1, 0).wait();
}

void early_exit_collective(ProcessGroup& pg, P2P&) {
  const int r = pg.rank(), n = pg.world_size();
  pg.barrier();
  if (r == n - 1) {
    say(r, "leaving early");
    std::_Exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  pg.all_reduce(at::ones({16}));
}

// Rank 1 is alive but never sends: rank 0's receive must time out.
void hang(ProcessGroup& pg, P2P& p2p) {
  if (pg.rank() == 1) {
    say(1, "sleeping");
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return;
  }
  at::Tensor x = at::zeros({4});
  Work w = p2p.irecv(x, 1, MessageKind::Gradient, 1, 3);
  std::string first;
  try {
    w.wait();
  } catch (const CommError& e) {
    first = e.what();
    check(e.timed_out() && e.peer() == 1 && e.rank() == 0 && e.op() == "recv" &&
              e.tag() == make_tag(MessageKind::Gradient, 1, 3),
          "CommError fields");
  }
  check(!first.empty(), "the receive from a silent peer must time out");
  // A failed Work rethrows the same error at once, not after waiting out another timeout: the
  // group's own timeout is the bound, which leaves a loaded machine all the room it needs.
  auto t0 = std::chrono::steady_clock::now();
  try {
    w.wait();
  } catch (const CommError& e) {
    check(e.what() == first, "same error on the second wait");
    check(std::chrono::steady_clock::now() - t0 < pg.timeout(), "the second wait is not another timeout");
    throw;
  }
  check(false, "the second wait did not throw");
}

// For late_master: rank 0 joins 1.5 s after every other rank has announced itself on the store
// and waits for it, so it is late however the ranks' starts spread on a loaded machine. With the
// launcher's store file the announcements are visible in it (a FileStore writes each key in the
// clear); with a TCP store, which rank 0 hosts, it can only come 1.5 s after its own start.
void join_last(const DistEnv& env) {
  // The job timeout bounds this wait (p2p_dist_test.cpp): a rank that never announces itself
  // fails the test there.
  for (bool all = env.store_path.empty(); !all;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ifstream in(env.store_path, std::ios::binary);
    const std::string store((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    all = true;
    for (int r = 1; r < env.world_size; ++r) all = all && store.find("/joined/" + std::to_string(r)) != std::string::npos;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
}

// Two ranks send each other more than a shared-memory ring holds (1 MiB):
// six messages of 400 KB and one of 3 MiB, all posted before either side
// waits, then waited in reverse order, so that every message but the last
// is set aside by the receiver while the sender streams the rest.
void streamed(ProcessGroup& pg, P2P& p2p) {
  check(pg.world_size() == 2, "streamed needs 2 ranks");
  const int peer = 1 - pg.rank();
  const auto shape = [](int m) { return m == 6 ? std::vector<int64_t>{3 << 17} : std::vector<int64_t>{50 << 10}; };
  std::vector<at::Tensor> in;
  std::vector<Work> recvs, sends;
  for (int m = 0; m < 7; ++m) {
    in.push_back(at::zeros(shape(m), at::kDouble));
    recvs.push_back(p2p.irecv(in.back(), peer, MessageKind::Activation, peer, m));
  }
  for (int m = 0; m < 7; ++m) sends.push_back(p2p.isend(payload(pg.rank(), m, 1.0, shape(m)), peer, MessageKind::Activation, pg.rank(), m));
  for (int m = 6; m >= 0; --m) recvs[m].wait();
  for (int m = 0; m < 7; ++m) check_equal(in[m], payload(peer, m, 1.0, shape(m)), "message " + std::to_string(m));
  wait_all(sends);
  const std::uint64_t bytes = (6ull * (50 << 10) + (3 << 17)) * sizeof(double);
  check(pg.bytes_sent() == bytes, "bytes_sent " + std::to_string(pg.bytes_sent()) + " != " + std::to_string(bytes));
  check(pg.bytes_received() == bytes, "bytes_received " + std::to_string(pg.bytes_received()));
}

// The sender sends 12 floats, the receiver expects 10.
void size_mismatch(ProcessGroup& pg, P2P& p2p) {
  if (pg.rank() == 0) {
    p2p.isend(at::ones({12}), 1, MessageKind::Activation, 0, 0).wait();
    pg.barrier();
  } else {
    at::Tensor x = at::zeros({10});
    p2p.irecv(x, 0, MessageKind::Activation, 0, 0).wait();
    pg.barrier();
  }
}

// 8 ranks as tp 2 x dp 2 x pp 2: in every group, an all-reduce of the
// members' global ranks sums exactly the ranks the layout names, and a
// message along the pp group reaches the next stage's rank.
void mesh(ProcessGroup& pg, P2P&) {
  MeshShape shape;
  shape.tp = 2, shape.dp = 2, shape.pp = pg.world_size() / 4;
  const Mesh m = Mesh::create(pg, shape);
  check(m.group(MeshDim::CP) == nullptr, "no cp group at cp 1");
  for (MeshDim d : {MeshDim::TP, MeshDim::DP, MeshDim::PP}) {
    ProcessGroup* g = m.group(d);
    const auto ranks = mesh_group_ranks(shape, pg.rank(), d);
    check(g && g->world_size() == static_cast<int>(ranks.size()), mesh_dim_name(d) + " group size");
    check(g->rank() == m.coord().at(d), mesh_dim_name(d) + " rank within the group");
    check(g->global_rank(g->rank()) == pg.rank(), mesh_dim_name(d) + " global rank");
    at::Tensor t = at::full({1}, static_cast<double>(pg.rank()), at::kDouble);
    g->all_reduce(t);
    double want = 0;
    for (int r : ranks) want += r;
    check(t.item<double>() == want, mesh_dim_name(d) + " group sums " + std::to_string(t.item<double>()) +
                                        ", want " + std::to_string(want));
  }
  ProcessGroup& pp = *m.group(MeshDim::PP);
  at::Tensor x = at::full({3}, static_cast<float>(pg.rank()));
  if (pp.rank() == 0) {
    pp.isend(x, 1, 5).wait();
  } else {
    pp.irecv(x, 0, 5).wait();
    check(x[0].item<float>() == static_cast<float>(pp.global_rank(0)), "pp message from the previous stage");
  }
}

// The last rank forms the job's group but not the subgroup of everybody:
// the others' new_group names it.
void subgroup_no_show(ProcessGroup& pg, P2P&) {
  // Every rank has finished connecting the world's mesh before the last one
  // leaves: otherwise a slow rank 0 still connecting to it meets a closed
  // connection instead of the subgroup's timeout.
  pg.barrier();
  if (pg.rank() == pg.world_size() - 1) return;
  std::vector<int> all(pg.world_size());
  for (int r = 0; r < pg.world_size(); ++r) all[r] = r;
  pg.new_group(all, "dp");
}

const std::map<std::string, Scenario>& scenarios() {
  static const std::map<std::string, Scenario> s = {
      {"ring", ring},
      {"pp2_hazard", pp2_hazard},
      {"broadcast", broadcast},
      {"all_reduce", all_reduce},
      {"meta", meta},
      {"dtypes", dtypes},
      {"early_exit", early_exit},
      {"early_exit_collective", early_exit_collective},
      {"hang", hang},
      {"size_mismatch", size_mismatch},
      {"streamed", streamed},
      {"mesh", mesh},
      {"subgroup_no_show", subgroup_no_show},
      {"late_master", [](ProcessGroup& pg, P2P&) { pg.barrier(); }},
      {"no_show", [](ProcessGroup& pg, P2P&) { pg.barrier(); }},
  };
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names;
  if (argc == 2) {
    std::stringstream list(argv[1]);
    for (std::string n; std::getline(list, n, ',');) names.push_back(n);
  }
  const bool known = !names.empty() && std::all_of(names.begin(), names.end(),
                                                   [](const std::string& n) { return scenarios().count(n) > 0; });
  if (!known) {
    std::fprintf(stderr, "usage: comm_worker SCENARIO[,SCENARIO...] (scenarios:");
    for (auto& [name, f] : scenarios()) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, ")\n");
    return 2;
  }
  const std::string name = names.front();
  return hp::testing::run_rank([&](int* rank_out) {
    int& rank = *rank_out;
    DistEnv env = DistEnv::from_environment();
    rank = env.rank;
    at::set_num_threads(1);
    if (name == "no_show" && rank == env.world_size - 1) {
      say(rank, "not joining");
      return 0;
    }
    if (name == "late_master" && rank == 0) join_last(env);
    ProcessGroup pg = ProcessGroup::create(env, hp::testing::rank_group_options());
    P2P p2p(pg);
    for (const std::string& n : names) {
      scenarios().at(n)(pg, p2p);
      say(rank, n + " ok");
    }
    return 0;
  });
}
