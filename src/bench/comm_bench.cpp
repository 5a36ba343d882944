#include "bench/comm_bench.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <iomanip>
#include <sstream>

#include "comm/c10d_baseline.hpp"
#include "comm/process_group.hpp"

namespace hp::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Microseconds of `reps` calls of f, every rank starting together.
double timed_us(comm::ProcessGroup& group, int reps, const std::function<void()>& f) {
  group.barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Times hyperpipe, c10d and the second c10d group `rounds` times each, every
// round in the next of the six orders (none always runs first, after another's
// traffic or on warmer caches), and returns the row.
CommBenchRow measure(std::string op, std::int64_t bytes, int rounds, const std::array<std::function<double()>, 3>& timers) {
  std::array<std::vector<double>, 3> us;
  std::vector<double> ratio, control;
  std::array<int, 3> order{0, 1, 2};
  for (int r = 0; r < rounds; ++r) {
    std::array<double, 3> t{};
    for (int i : order) t[i] = timers[i]();
    for (int i = 0; i < 3; ++i) us[i].push_back(t[i]);
    ratio.push_back(t[1] / t[0]);
    control.push_back(t[1] / t[2]);
    std::next_permutation(order.begin(), order.end());
  }
  return {std::move(op), bytes, median(us[0]), median(us[1]), spread(ratio), spread(control)};
}

// Fewer repetitions for larger messages: about the same bytes per size.
int reps_for(std::int64_t bytes) { return static_cast<int>(std::clamp<std::int64_t>((32 << 20) / bytes, 4, 400)); }

}  // namespace

std::vector<CommBenchRow> bench_comm(comm::ProcessGroup& group, int rounds) {
  comm::C10dBaseline c10d(group, "c10d-baseline");
  comm::C10dBaseline control(group, "c10d-control");
  const int rank = group.rank();
  std::vector<CommBenchRow> rows;
  for (std::int64_t bytes : {std::int64_t{4} << 10, std::int64_t{64} << 10, std::int64_t{1} << 20, std::int64_t{16} << 20}) {
    at::Tensor t = at::zeros({bytes / 4}, at::kFloat);
    const int reps = reps_for(bytes);
    // Rank 0 sends and waits for the echo; rank 1 echoes; the others only keep up with the barriers.
    using Op = std::function<void(const at::Tensor&, int)>;
    auto ping = [&](Op send, Op recv) {
      return [&, send = std::move(send), recv = std::move(recv)] {
        return timed_us(group, reps, [&] {
                 if (rank == 0) {
                   send(t, 1);
                   recv(t, 1);
                 } else if (rank == 1) {
                   recv(t, 0);
                   send(t, 0);
                 }
               }) / (2 * reps);
      };
    };
    auto plain = [&](comm::C10dBaseline& c) {
      return ping([&c](const at::Tensor& x, int peer) { c.send(x, peer, 7); },
                  [&c](const at::Tensor& x, int peer) { c.recv(x, peer, 7); });
    };
    rows.push_back(measure("p2p", bytes, rounds,
                           {ping([&](const at::Tensor& x, int peer) { group.isend(x, peer, 7).wait(); },
                                 [&](const at::Tensor& x, int peer) { group.irecv(x, peer, 7).wait(); }),
                            plain(c10d), plain(control)}));
  }
  for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{16} << 20}) {
    at::Tensor t = at::zeros({bytes / 4}, at::kFloat);
    const int reps = reps_for(bytes);
    auto timer = [&](std::function<void()> f) {
      return [&, f = std::move(f)] { return timed_us(group, reps, f) / reps; };
    };
    rows.push_back(measure("broadcast", bytes, rounds,
                           {timer([&] { group.broadcast({t}, 0); }), timer([&] { c10d.broadcast(t, 0); }),
                            timer([&] { control.broadcast(t, 0); })}));
  }
  group.barrier();
  return rows;
}

std::string format_comm_rows(const std::vector<CommBenchRow>& rows, int rounds) {
  std::ostringstream os;
  os << "\ncommunication: src/comm against plain c10d Gloo, medians of " << rounds
     << " rounds (p2p: one way, rank 0 <-> 1; ratio: c10d's time over src/comm's, per round;"
        " control: plain c10d against a second plain c10d group)\n"
     << std::left << std::setw(11) << "op" << std::right << std::setw(8) << "KiB" << std::setw(15) << "hyperpipe us"
     << std::setw(10) << "c10d us" << std::setw(8) << "ratio" << std::setw(15) << "(range)" << std::setw(10)
     << "control" << std::setw(15) << "(range)" << "\n";
  auto range = [](const Spread& s) {
    std::ostringstream r;
    r << std::fixed << std::setprecision(2) << "(" << s.low << "-" << s.high << ")";
    return r.str();
  };
  for (const auto& r : rows)
    os << std::left << std::setw(11) << r.op << std::right << std::fixed << std::setprecision(0) << std::setw(8)
       << r.bytes / 1024.0 << std::setprecision(1) << std::setw(15) << r.hyperpipe_us << std::setw(10) << r.c10d_us
       << std::setprecision(3) << std::setw(8) << r.ratio.median << std::setw(15) << range(r.ratio) << std::setw(10)
       << r.control.median << std::setw(15) << range(r.control) << "\n";
  return os.str();
}

}  // namespace hp::bench
