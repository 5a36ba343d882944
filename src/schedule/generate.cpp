#include "schedule/generate.hpp"

#include <stdexcept>
#include <cstdint>
#include <string>

#include "schedule/schedule_table.hpp"

namespace hp::schedule {
namespace {

[[noreturn]] void reject(const std::string& msg) { throw std::invalid_argument(msg); }

std::string str(int v) { return std::to_string(v); }

// The layer split this library assumes when --layers is given: the N = PP * v
// chunks (global stages) get layers / N each, and the first layers % N stages
// one more. Stage 0 (rank 0's first chunk) therefore holds ceil(layers / N).
int stage0_layers(const ScheduleOptions& o) {
  const int n = o.num_stages();
  return o.layers / n + (o.layers % n > 0 ? 1 : 0);
}

// Megatron's condition on the interleaved groups (forward_backward_pipelining_
// with_interleaving): a group of fewer than PP micro-batches hands chunk c+1
// of rank 0 its input only after the steady phase needs it, and the pipeline
// deadlocks. One group holding every micro-batch (G >= MB) always works.
// With one rank or one chunk the grouping changes nothing.
void check_group_size(const ScheduleOptions& o) {
  const int g = o.group_size, mb = o.micro_batches;
  if (g == 0 || o.pp == 1 || o.vpp == 1 || g >= mb) return;
  if (g >= o.pp && (mb % g == 0 || mb % g >= o.pp)) return;
  ScheduleOptions d = o;
  d.group_size = 0;
  reject("schedule.group_size " + str(g) + " does not work with schedule.pp " + str(o.pp) + " schedule.micro_batches " + str(mb) +
         ": interleaved 1F1B needs schedule.group_size >= schedule.micro_batches, or >= schedule.pp with a last group (schedule.micro_batches % schedule.group_size = " +
         str(mb % g) + ") of 0 or >= schedule.pp micro-batches; e.g. schedule.group_size " + str(d.effective_group_size()) +
         " (0 picks it)");
}

void check_mpipe(const ScheduleOptions& o) {
  const MPipeOptions& m = o.mpipe;
  if (!is_mpipe_body(m.body))
    reject("schedule.mpipe.body must be one of " + mpipe_body_names() + " (the pipeline MPipe transposes around), got " +
           std::string(kind_name(m.body)));
  // The body's own rules, its kind named as MPipe's body.
  ScheduleOptions body = o;
  body.kind = m.body;
  try {
    check_options(body);
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    const std::string kind = "schedule.kind ", as_body = "schedule.mpipe.body ";
    for (size_t at = msg.find(kind); at != std::string::npos; at = msg.find(kind, at + as_body.size()))
      msg.replace(at, kind.size(), as_body);
    reject(msg);
  }
  if (o.pp < 2)
    reject("MPipe Transpose needs schedule.pp >= 2: with one rank there is no idle warmup to transpose into (got schedule.pp " +
           str(o.pp) + ")");
  if (m.transpose_layers < 0)
    reject("schedule.mpipe.transpose_layers must be >= 0 (0 transposes only the data load), got " +
           str(m.transpose_layers));
  if (o.layers > 0 && m.transpose_layers >= stage0_layers(o))
    reject("schedule.mpipe.transpose_layers must be < " + str(stage0_layers(o)) +
           ", the layers of stage 0's first chunk (schedule.layers " + str(o.layers) + " over schedule.pp " +
           str(o.pp) + " schedule.vpp " + str(o.vpp) + "), so its body keeps a layer; got " +
           str(m.transpose_layers));
  if (m.owner_backward && m.transpose_layers == 0)
    reject("schedule.mpipe.owner_backward needs schedule.mpipe.transpose_layers >= 1: with T = 0 there is nothing to backprop");
  if (m.overflow == Overflow::Auto) {
    if (static_cast<int>(m.owners.size()) != o.micro_batches)
      reject("schedule.mpipe.overflow auto needs an owner per micro-batch (choose_owners picks them): got " +
             str(static_cast<int>(m.owners.size())) + " for schedule.micro_batches " + str(o.micro_batches));
    for (size_t i = 0; i < m.owners.size(); ++i)
      if (m.owners[i] < -1 || m.owners[i] >= o.pp)
        reject("schedule.mpipe.owners[" + str(static_cast<int>(i)) + "] must be a rank in [0, " + str(o.pp) +
               ") or -1 (rank 0, inline), got " + str(m.owners[i]));
  }
  if (m.owner_backward && m.frozen_preprocess)
    reject("schedule.mpipe.owner_backward needs a trainable preprocess: with schedule.mpipe.frozen_preprocess there is "
           "nothing to backprop (drop one of the two)");
}

}  // namespace

void check_options(const ScheduleOptions& o) {
  if (o.pp < 1) reject("schedule.pp must be >= 1, got " + str(o.pp));
  if (o.vpp < 1) reject("schedule.vpp must be >= 1, got " + str(o.vpp));
  if (o.micro_batches < 1) reject("schedule.micro_batches must be >= 1, got " + str(o.micro_batches));
  // Each (stage, micro) is a few actions: beyond this a step's lists alone do not fit in memory.
  constexpr std::int64_t kMaxForwards = 10'000'000;
  if (static_cast<std::int64_t>(o.micro_batches) * o.pp * o.vpp > kMaxForwards)
    reject("schedule.micro_batches " + str(o.micro_batches) + " x schedule.pp " + str(o.pp) + " x schedule.vpp " +
           str(o.vpp) + " forwards a step is more than " + std::to_string(kMaxForwards) +
           " actions can describe; use fewer, larger micro-batches");
  if (o.group_size < 0)
    reject("schedule.group_size must be >= 1 (or 0 for the default, schedule.pp), got " + str(o.group_size));
  if (o.layers < 0) reject("schedule.layers must be >= 0 (0 = not given), got " + str(o.layers));
  // The schedule's row: its vpp rule, its group size, its own refusals.
  const ScheduleRow& row = schedule_row(o.kind);
  const std::string kind = "schedule.kind " + row.name;
  if (row.max_vpp == 1 && o.vpp != 1 && row.pipelined)
    reject(kind + " runs one chunk per rank: use schedule.vpp 1, or schedule.kind interleaved for schedule.vpp > 1 "
           "(got schedule.vpp " + str(o.vpp) + ")");
  if (row.placement == Placement::V && o.vpp != 2)
    reject(kind + " runs two chunks per rank in V placement (rank r holds stages r and 2 x schedule.pp - 1 - r):"
           " use schedule.vpp 2 (got schedule.vpp " + str(o.vpp) + ")");
  if (row.refuse)
    if (const std::string why = row.refuse(o); !why.empty()) reject(why);
  if (!row.runs_vpp(o.vpp))
    reject(kind + " runs schedule.vpp in [" + str(row.min_vpp) + ", " +
           (row.max_vpp > 0 ? str(row.max_vpp) : std::string("any")) + "], got schedule.vpp " + str(o.vpp));
  if (row.grouped) check_group_size(o);
  if (o.layers > 0 && o.layers < o.num_stages())
    reject("schedule.layers must be >= schedule.pp * schedule.vpp = " + str(o.num_stages()) +
           " so every chunk holds a layer, got " + str(o.layers));
  if (o.kind == ScheduleKind::MPipe) check_mpipe(o);
}

Schedule generate(const ScheduleOptions& o) {
  check_options(o);
  if (o.kind == ScheduleKind::MPipe) return generate_mpipe(o);
  Schedule s;
  s.options = o;
  s.ranks = insert_body_comms(o, body_compute_order(o));
  return s;
}

Schedule filter(const Schedule& s, bool (*keep)(ActionType)) {
  Schedule out;
  out.options = s.options;
  out.ranks.resize(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r)
    for (const Action& a : s.ranks[r])
      if (keep(a.type)) {
        // A pair whose backward is filtered out is no pair.
        if (!out.ranks[r].empty() && out.ranks[r].back().overlap && !is_input_backward(a.type))
          out.ranks[r].back().overlap = false;
        out.ranks[r].push_back(a);
      }
  for (auto& rank : out.ranks)
    if (!rank.empty()) rank.back().overlap = false;
  return out;
}

}  // namespace hp::schedule
