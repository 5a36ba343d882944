#include "cli/bench_report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace hp::cli {
namespace {

using bench::BenchRow;
using bench::MeasuredAndSimulated;

std::string measured_simulated(double measured, double simulated, int precision) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(precision) << measured << " (" << simulated << ")";
  return os.str();
}
std::string measured_simulated(const MeasuredAndSimulated& v, int precision, double scale = 1) {
  return measured_simulated(v.measured * scale, v.simulated * scale, precision);
}

// Data and tensor parallelism's share of each row's step, measured beside simulated.
void format_mesh_rows(const std::vector<BenchRow>& rows, std::ostream& os) {
  bool header = false;
  for (const auto& r : rows) {
    if (!r.data_parallel) continue;
    const auto& d = *r.data_parallel;
    if (!header)
      os << "data parallelism (dp " << d.dp << ", one replica's step), ms measured (simulated):"
         << " without averaging, with, the averaging's cost, and each replica's share of a lone pipeline's"
         << " throughput\n";
    header = true;
    const double m = r.measured_ms, s = r.simulated_ms, m0 = d.no_sync_ms.measured, s0 = d.no_sync_ms.simulated;
    os << std::left << std::setw(16) << r.label() << std::right << std::setw(20) << measured_simulated(d.no_sync_ms, 2)
       << std::setw(20) << measured_simulated(m, s, 2) << std::setw(18) << measured_simulated(m - m0, s - s0, 2)
       << std::setw(20) << measured_simulated(100 * m0 / m, 100 * s0 / s, 1) << " %   (" << std::fixed
       << std::setprecision(2) << d.grad_bytes / (1 << 20) << " MiB of gradients a rank)\n";
  }
  header = false;
  for (const auto& r : rows) {
    if (!r.tensor_parallel) continue;
    const auto& t = *r.tensor_parallel;
    if (!header)
      os << "tensor parallelism (tp " << t.tp << "): rank 0's all-reduces in one step, measured"
         << " (simulated): calls, MiB, ms\n";
    header = true;
    os << std::left << std::setw(16) << r.label() << std::right << std::setw(16) << measured_simulated(t.calls, 0)
       << std::setw(20) << measured_simulated(t.bytes, 3, 1.0 / (1 << 20)) << std::setw(20) << measured_simulated(t.ms, 2)
       << "\n";
  }
}

}  // namespace

std::string format_rows(const std::vector<BenchRow>& rows) {
  std::ostringstream os;
  const double m0 = rows.front().measured_ms, s0 = rows.front().simulated_ms;
  os << std::left << std::setw(16) << "schedule" << std::right << std::setw(13) << "measured ms" << std::setw(14)
     << "simulated ms" << std::setw(12) << "meas/sim" << std::setw(16) << "meas vs first" << std::setw(15)
     << "sim vs first" << std::setw(17) << "bubble (theory)" << "  peak MiB by rank\n";
  for (const auto& r : rows) {
    const double m = r.measured_ms, s = r.simulated_ms;
    os << std::left << std::setw(16) << r.label() << std::right << std::fixed << std::setprecision(2) << std::setw(13)
       << m << std::setw(14) << s << std::setw(12) << m / s << std::setw(16) << m / m0 << std::setw(15) << s / s0;
    std::ostringstream bubble;
    bubble << std::fixed << std::setprecision(1) << 100 * r.bubble_in_step() << "%";
    if (r.theory_bubble) bubble << " (" << 100 * *r.theory_bubble << "%)";
    os << std::setw(17) << bubble.str() << "  ";
    std::ostringstream peaks;
    peaks << std::fixed << std::setprecision(2);
    for (const double b : r.peak_bytes) peaks << (peaks.tellp() > 0 ? "/" : "") << b / (1 << 20);
    os << peaks.str() << "\n";
  }
  if (rows.size() > 1) {
    // Whether the simulator, given the calibrated costs, picks the schedule that measured fastest.
    auto fastest = [&](double BenchRow::*key) {
      return std::min_element(rows.begin(), rows.end(), [&](const auto& x, const auto& y) { return x.*key < y.*key; })
          ->label();
    };
    const std::string measured = fastest(&BenchRow::measured_ms), simulated = fastest(&BenchRow::simulated_ms);
    os << "fastest: measured " << measured << ", simulated " << simulated
       << (measured == simulated ? " (the simulator picks the measured winner)" : " (they differ)") << "\n";
  }
  for (const auto& r : rows)
    if (r.stage0) {
      // Whether the split recomputes anything: I + W against the whole backward.
      const double b = r.stage0->b, i = r.stage0->i, w = r.stage0->w;
      os << std::fixed << std::setprecision(2) << "split backward (stage 0, calibrated): I " << i << " + W " << w << " = "
         << i + w << " ms against B " << b << " ms (" << (i + w) / b << " of B)\n";
      break;
    }
  bool mpipe_header = false;
  for (const auto& r : rows) {
    if (!r.mpipe_measured) continue;
    if (!mpipe_header)
      os << "MPipe's own work on rank 0 per step, ms measured (simulated): parameter broadcast, preprocess"
            " backward (recompute included)\n";
    mpipe_header = true;
    const auto &m = *r.mpipe_measured, &s = *r.mpipe_simulated;
    os << std::left << std::setw(16) << r.label() << std::right << std::setprecision(2) << std::setw(10) << m.broadcast
       << " (" << s.broadcast << ")" << std::setw(10) << m.preprocess_backward << " (" << s.preprocess_backward << ")\n";
  }
  format_mesh_rows(rows, os);
  return os.str();
}

std::string format_overhead(const std::vector<BenchRow>& rows) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2)
     << "\nwhere one step went, ms (compute without waits | waits: for received data, the last sends, the"
        " reductions | posting messages | the rest: the runtime between actions | an AdamW step), and the"
        " runtime's own cost per action, us (posting and the rest over the rank's actions)\n";
  for (const auto& r : rows) {
    os << r.label() << "\n";
    os << std::right << std::setw(8) << "rank" << std::setw(10) << "step" << std::setw(10) << "compute" << std::setw(10)
       << "wait" << std::setw(10) << "post" << std::setw(10) << "rest" << std::setw(11) << "optimizer" << std::setw(9)
       << "rest %" << std::setw(9) << "actions" << std::setw(11) << "us/action" << "\n";
    int rank = 0;
    for (const auto& b : r.traced) {
      os << std::setw(8) << rank++;
      for (const double v : {b.step, b.compute, b.wait, b.post, b.rest}) os << std::setw(10) << v;
      os << std::setw(11) << b.optimizer << std::setw(8) << 100.0 * b.rest / b.step << "%" << std::setw(9)
         << static_cast<int>(b.actions) << std::setw(11) << b.overhead_us_per_action() << "\n";
    }
  }
  return os.str();
}

std::string format_ops(const BenchRow& row, int rank, int top) {
  double all_us = 0;
  for (const auto& op : row.ops) all_us += op.self_us;
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << "rank " << rank << ", " << row.label() << ": one step's top " << top
     << " operators by self time, of " << all_us / 1000 << " ms in operators\n"
     << std::left << std::setw(40) << "operator" << std::right << std::setw(8) << "calls" << std::setw(11) << "self ms"
     << std::setw(11) << "total ms" << std::setw(9) << "self %" << "\n";
  for (int i = 0; i < std::min<int>(top, static_cast<int>(row.ops.size())); ++i) {
    const auto& op = row.ops[i];
    os << std::left << std::setw(40) << op.name.substr(0, 39) << std::right << std::setw(8) << op.calls << std::setw(11)
       << op.self_us / 1000 << std::setw(11) << op.total_us / 1000 << std::setw(8) << std::setprecision(1)
       << 100 * op.self_us / all_us << std::setprecision(3) << "%\n";
  }
  return os.str();
}

std::string format_advisor_check(const bench::AdvisorCheck& c) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1) << "advisor (plan --advise on the emulated layer costs): first choice "
     << c.first_choice << " (predicted " << c.first_predicted << " ms)\n";
  if (c.first_measured.empty()) {
    os << "  none of the measured layouts is among its candidates\n";
    return os.str();
  }
  os << "  of the measured layouts it ranks " << c.first_measured << " first (its #" << c.first_measured_rank
     << "); measured fastest " << c.measured_fastest
     << (c.agrees() ? ": the advisor picks the measured winner" : ": they differ");
  if (!c.not_candidates.empty()) {
    os << " (not its candidates:";
    for (const auto& n : c.not_candidates) os << " " << n;
    os << ")";
  }
  os << "\n";
  return os.str();
}

nlohmann::json row_json(const BenchRow& r) {
  using nlohmann::json;
  auto pair = [](const MeasuredAndSimulated& v) { return json{v.measured, v.simulated}; };
  json data_parallel = nullptr, tensor_parallel = nullptr, stage0 = nullptr, mpipe = nullptr, overhead = nullptr;
  if (const auto& d = r.data_parallel)
    data_parallel = {{"dp", d->dp},
                     {"no_sync_ms", pair(d->no_sync_ms)},
                     {"grad_bytes", d->grad_bytes},
                     {"latency_ms", d->latency_ms},
                     {"bytes_per_ms", d->bytes_per_ms}};
  if (const auto& t = r.tensor_parallel)
    tensor_parallel = {{"tp", t->tp},           {"calls", pair(t->calls)},     {"bytes", pair(t->bytes)},
                       {"ms", pair(t->ms)},     {"latency_ms", t->latency_ms}, {"bytes_per_ms", t->bytes_per_ms}};
  // Stage 0's calibrated backward, whole and split as a zero-bubble schedule runs it.
  if (r.stage0) stage0 = {{"b", r.stage0->b}, {"i", r.stage0->i}, {"w", r.stage0->w}};
  // MPipe: rank 0's parameter broadcast and preprocess backward per step, measured and simulated.
  if (r.mpipe_measured)
    mpipe = {{"broadcast", {r.mpipe_measured->broadcast, r.mpipe_simulated->broadcast}},
             {"preprocess_backward", {r.mpipe_measured->preprocess_backward, r.mpipe_simulated->preprocess_backward}}};
  if (!r.traced.empty()) {
    overhead = json::array();
    for (const auto& b : r.traced)
      overhead.push_back({b.step, b.compute, b.wait, b.post, b.rest, b.optimizer, b.actions, b.overhead_us_per_action()});
  }
  return {{"schedule", r.schedule},
          {"pp", r.layout.pp},
          {"vpp", r.layout.vpp},
          {"mb", r.layout.micro_batches},
          {"measured_ms", r.measured_ms},
          {"simulated_ms", r.simulated_ms},
          {"measured_over_simulated", r.measured_ms / r.simulated_ms},
          {"simulated_bubble", r.simulated_bubble},
          {"ideal_ms", r.ideal_ms},
          {"bubble_over_ideal", r.bubble_over_ideal()},
          {"bubble_in_step", r.bubble_in_step()},
          {"theory_bubble_over_ideal", r.theory_bubble ? json(*r.theory_bubble) : json(nullptr)},
          {"peak_bytes", r.peak_bytes},
          {"stage0_backward_ms", stage0},
          {"transpose_layers", r.layout.transposed_layers()},
          {"preprocess_ms", {r.preprocess_f, r.preprocess_b}},
          {"mpipe_rank0_ms", mpipe},
          {"data_parallel", data_parallel},
          {"tensor_parallel", tensor_parallel},
          {"overhead_ms", overhead}};
}

}  // namespace hp::cli
