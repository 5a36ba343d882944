#include "cli/bench_comm.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>

#include "comm/c10d_baseline.hpp"
#include "comm/process_group.hpp"

namespace hp::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Microseconds of `reps` calls of f, every rank starting together.
double timed_us(comm::ProcessGroup& group, int reps, const std::function<void()>& f) {
  group.barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Rounds of a then b, then b then a, ...: neither always runs first (after
// the other's traffic, or on warmer caches).
void alternate(int rounds, const std::function<void()>& a, const std::function<void()>& b) {
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      a();
      b();
    } else {
      b();
      a();
    }
  }
}

// Fewer repetitions for larger messages: about the same bytes per size.
int reps_for(std::int64_t bytes) { return static_cast<int>(std::clamp<std::int64_t>((32 << 20) / bytes, 4, 400)); }

}  // namespace

std::vector<CommBenchRow> bench_comm(comm::ProcessGroup& group, int rounds) {
  comm::C10dBaseline c10d(group);
  const int rank = group.rank();
  std::vector<CommBenchRow> rows;
  for (std::int64_t bytes : {std::int64_t{4} << 10, std::int64_t{64} << 10, std::int64_t{1} << 20, std::int64_t{16} << 20}) {
    at::Tensor t = at::zeros({bytes / 4}, at::kFloat);
    const int reps = reps_for(bytes);
    // Rank 0 sends and waits for the echo; rank 1 echoes; the others only keep up with the barriers.
    auto ping = [&](const std::function<void(const at::Tensor&, int)>& send,
                    const std::function<void(const at::Tensor&, int)>& recv) {
      return [&, send, recv] {
        if (rank == 0) {
          send(t, 1);
          recv(t, 1);
        } else if (rank == 1) {
          recv(t, 0);
          send(t, 0);
        }
      };
    };
    auto hp = ping([&](const at::Tensor& x, int peer) { group.isend(x, peer, 7).wait(); },
                   [&](const at::Tensor& x, int peer) { group.irecv(x, peer, 7).wait(); });
    auto raw = ping([&](const at::Tensor& x, int peer) { c10d.send(x, peer, 7); },
                    [&](const at::Tensor& x, int peer) { c10d.recv(x, peer, 7); });
    CommBenchRow row{"p2p", bytes, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
    alternate(rounds, [&] { row.hyperpipe_us = std::min(row.hyperpipe_us, timed_us(group, reps, hp) / (2 * reps)); },
              [&] { row.c10d_us = std::min(row.c10d_us, timed_us(group, reps, raw) / (2 * reps)); });
    rows.push_back(row);
  }
  for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{16} << 20}) {
    at::Tensor t = at::zeros({bytes / 4}, at::kFloat);
    const int reps = reps_for(bytes);
    CommBenchRow row{"broadcast", bytes, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::infinity()};
    alternate(
        rounds, [&] { row.hyperpipe_us = std::min(row.hyperpipe_us, timed_us(group, reps, [&] { group.broadcast({t}, 0); }) / reps); },
        [&] { row.c10d_us = std::min(row.c10d_us, timed_us(group, reps, [&] { c10d.broadcast(t, 0); }) / reps); });
    rows.push_back(row);
  }
  group.barrier();
  return rows;
}

std::string format_comm_rows(const std::vector<CommBenchRow>& rows) {
  std::ostringstream os;
  os << "\ncommunication: src/comm against plain c10d Gloo, best of the rounds (p2p: one way, rank 0 <-> 1)\n"
     << std::left << std::setw(11) << "op" << std::right << std::setw(10) << "KiB" << std::setw(15) << "hyperpipe us"
     << std::setw(11) << "c10d us" << std::setw(15) << "hyperpipe MB/s" << std::setw(11) << "c10d MB/s" << std::setw(9)
     << "ratio" << "\n";
  for (const auto& r : rows)
    os << std::left << std::setw(11) << r.op << std::right << std::fixed << std::setprecision(0) << std::setw(10)
       << r.bytes / 1024.0 << std::setprecision(1) << std::setw(15) << r.hyperpipe_us << std::setw(11) << r.c10d_us
       << std::setprecision(0) << std::setw(15) << r.bytes / r.hyperpipe_us << std::setw(11) << r.bytes / r.c10d_us
       << std::setprecision(3) << std::setw(9) << r.ratio() << "\n";
  return os.str();
}

}  // namespace hp::cli
