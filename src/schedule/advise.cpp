#include "schedule/advise.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "schedule/generate.hpp"
#include "schedule/schedule_table.hpp"
#include "schedule/validate.hpp"

namespace hp::schedule {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string percent(double fraction) { return fixed(100 * fraction, 1) + "%"; }

// The families explain() compares: MPipe with T = 0 moves only the data load,
// so it is told apart from MPipe that moves layers (and broadcasts them).
std::string family(const Candidate& c) {
  if (c.options.kind != ScheduleKind::MPipe) return c.name.substr(0, c.name.find(' '));
  return c.options.mpipe.transpose_layers == 0 ? "mpipe T=0" : "mpipe T>=1";
}

std::string mpipe_name(const ScheduleOptions& o) {
  const auto& m = o.mpipe;
  std::string n = m.body == ScheduleKind::Interleaved ? "mpipe v=" + std::to_string(o.vpp)
                                                     : "mpipe body=" + std::string(kind_name(m.body));
  const ScheduleRow& body = schedule_row(m.body);
  if (m.body != ScheduleKind::Interleaved && !body.fixed_vpp()) n += " v=" + std::to_string(o.vpp);
  n += " T=" + std::to_string(m.transpose_layers);
  if (o.micro_batches > o.nt()) n += m.overflow == Overflow::Min ? " min" : " full";
  if (m.owner_backward) n += " owner-backward";
  return n;
}

}  // namespace

void ModelProfile::validate() const {
  require(layers >= 1, "profile.layers must be >= 1, got " + std::to_string(layers));
  require(tower_layers >= 0, "profile.tower_layers must be >= 0, got " + std::to_string(tower_layers));
  for (const auto& [name, v] : {std::pair{"layer_f", layer_f}, {"layer_b", layer_b}, {"layer_bytes", layer_bytes},
                                {"embed_f", embed_f}, {"embed_b", embed_b}, {"embed_bytes", embed_bytes},
                                {"tower_f", tower_f}, {"tower_b", tower_b}, {"tower_bytes", tower_bytes}})
    require(std::isfinite(v) && v >= 0, std::string("profile.") + name + " must be a finite number >= 0, got " + fixed(v));
}

CostModel profile_costs(const ModelProfile& m, const ScheduleOptions& layout) {
  const int per_chunk = m.layers / layout.num_stages();
  const double train = m.frozen_preprocess ? 0.0 : 1.0;  // a frozen preprocess has no backward
  CostModel c;
  c.f = per_chunk * m.layer_f;
  c.b = per_chunk * m.layer_b;
  c.p2p_latency = m.p2p_latency;
  c.p2p_bw = m.p2p_bw;
  c.broadcast_bw = m.broadcast_bw;
  c.activation_bytes = m.activation_bytes;
  c.preprocess_input_bytes = m.input_bytes;
  const int t = layout.transposed_layers();
  StageCost stage0{c.f + m.tower_layers * m.tower_f, c.b + train * m.tower_layers * m.tower_b};
  if (layout.kind != ScheduleKind::MPipe) {
    // The simulator adds the preprocess (embedding) to F(0, m) and B(0, m).
    c.pre_f = m.embed_f;
    c.pre_b = train * m.embed_b;
  } else if (t == 0) {
    // Only the data load moves: everything else stays in stage 0.
    stage0.f += m.embed_f;
    stage0.b += train * m.embed_b;
  } else if (m.tower_layers > 0) {  // T tower blocks (and the patch embedding) move
    c.pre_f = m.embed_f + t * m.tower_f;
    c.pre_b = train * (m.embed_b + t * m.tower_b);
    stage0 = {stage0.f - t * m.tower_f, stage0.b - train * t * m.tower_b};
    c.broadcast_bytes = m.embed_bytes + t * m.tower_bytes;
  } else {  // the embedding and T body layers move
    c.pre_f = m.embed_f + t * m.layer_f;
    c.pre_b = train * (m.embed_b + t * m.layer_b);
    stage0 = {(per_chunk - t) * m.layer_f, (per_chunk - t) * m.layer_b};
    c.broadcast_bytes = m.embed_bytes + t * m.layer_bytes;
  }
  c.per_stage[0] = stage0;
  return c;
}

Advice advise(const ModelProfile& m, int pp, int micro_batches) {
  m.validate();
  Advice advice;
  std::vector<ScheduleOptions> layouts;
  ScheduleOptions base;
  base.pp = pp;
  base.micro_batches = micro_batches;
  // The engine checks a GPT's T against stage 0's layers; a tower's T counts tower blocks.
  base.layers = m.tower_layers > 0 ? 0 : m.layers;
  base.mpipe.frozen_preprocess = m.frozen_preprocess;
  base.kind = ScheduleKind::OneFOneB;
  base.vpp = 1;
  layouts.push_back(base);
  for (int v = 1; v * pp <= m.layers; ++v) {
    if (m.layers % (v * pp) != 0) {
      advice.skipped.push_back("v=" + std::to_string(v) + ": " + std::to_string(m.layers) + " layers do not split over " +
                               std::to_string(v * pp) + " stages");
      continue;
    }
    ScheduleOptions o = base;
    o.vpp = v;
    // Every schedule of the table that runs v chunks per rank, from the v its
    // row is advised at (1F1B is the baseline above; MPipe goes round each body below).
    for (ScheduleKind k : schedule_kinds()) {
      const ScheduleRow& r = schedule_row(k);
      if (k == ScheduleKind::OneFOneB || !r.order || r.advised_from_vpp == 0 || v < r.advised_from_vpp || !r.runs_vpp(v))
        continue;
      o.kind = k;
      layouts.push_back(o);
    }
    o.kind = ScheduleKind::MPipe;
    // MPipe around every body that runs v chunks per rank: the spec's
    // (interleaved) first, then the others in the table's order.
    std::vector<ScheduleKind> bodies = {MPipeOptions{}.body};
    for (ScheduleKind k : schedule_kinds())
      if (k != bodies.front() && schedule_row(k).mpipe_body && schedule_row(k).runs_vpp(v)) bodies.push_back(k);
    const int max_t = m.tower_layers > 0 ? m.tower_layers : m.layers / (v * pp) - 1;  // stage 0 keeps a body layer
    for (int t = 0; t <= max_t; ++t) {
      o.mpipe.transpose_layers = t;
      for (Overflow overflow : {Overflow::Full, Overflow::Min}) {
        if (overflow == Overflow::Min && micro_batches <= o.nt()) continue;  // the modes coincide
        o.mpipe.overflow = overflow;
        for (bool owner_backward : {false, true}) {
          if (owner_backward && (t == 0 || m.frozen_preprocess)) continue;  // no preprocess backward to move
          o.mpipe.owner_backward = owner_backward;
          for (ScheduleKind body : bodies) {
            o.mpipe.body = body;
            layouts.push_back(o);
          }
        }
      }
    }
  }
  for (const auto& o : layouts) {
    Candidate c;
    c.options = o;
    // A schedule of one fixed v is named alone, the others with their v.
    const ScheduleRow& row = schedule_row(o.kind);
    c.name = o.kind == ScheduleKind::MPipe           ? mpipe_name(o)
             : row.fixed_vpp()                         ? row.name
                                                       : row.name + " v=" + std::to_string(o.vpp);
    Schedule s;
    try {
      s = generate(o);
    } catch (const std::invalid_argument& e) {
      advice.skipped.push_back(c.name + ": " + e.what());
      continue;
    }
    if (auto v = validate(s); !v.ok()) throw std::logic_error("advise generated an invalid " + c.name + ":\n" + v.to_string());
    c.costs = profile_costs(m, o);
    const SimulationReport r = simulate(s, c.costs);
    c.step_time = r.step_time;
    c.bubble_fraction = r.bubble_fraction;
    for (const auto& rank : r.ranks)
      c.peak_layer_activations =
          std::max(c.peak_layer_activations, static_cast<double>(rank.peak_activations) * (m.layers / o.num_stages()));
    c.broadcast_time = time_in(r, 0, ActionType::MPIPE_PARAM_BROADCAST);
    c.recompute_time = time_in(r, 0, ActionType::MPIPE_TRANSPOSE_BWD);
    advice.ranked.push_back(std::move(c));
  }
  if (advice.ranked.empty()) throw std::invalid_argument("no layout of the model can run on schedule.pp " + std::to_string(pp) + ": " +
                                advice.skipped.front());
  std::stable_sort(advice.ranked.begin(), advice.ranked.end(), [](const Candidate& a, const Candidate& b) {
    const double tol = 1e-9 * std::max(a.step_time, b.step_time);
    if (std::abs(a.step_time - b.step_time) > tol) return a.step_time < b.step_time;
    return a.peak_layer_activations < b.peak_layer_activations;
  });
  return advice;
}

std::string explain(const Advice& advice) {
  const Candidate& w = advice.ranked.front();
  std::string out = w.name + " wins: step " + fixed(w.step_time) + ", bubble " + percent(w.bubble_fraction) +
                    ", peak " + fixed(w.peak_layer_activations, 0) + " layer-activations.\n";
  for (const char* other : {"1f1b", "interleaved", "mpipe T=0", "mpipe T>=1"}) {
    if (family(w) == other) continue;
    const auto it = std::find_if(advice.ranked.begin(), advice.ranked.end(),
                                 [&](const Candidate& c) { return family(c) == other; });
    if (it == advice.ranked.end()) continue;
    const Candidate& c = *it;
    const double slower = c.step_time / w.step_time - 1;
    out += "  vs " + c.name + ": " + (slower < 5e-4 ? std::string("as fast") : percent(slower) + " slower") +
           " (bubble " + percent(c.bubble_fraction) + ", peak " + fixed(c.peak_layer_activations, 0) + ")";
    if (family(c) == "mpipe T>=1" && c.broadcast_time + c.recompute_time > 0)
      out += "; on rank 0 its parameter broadcast takes " + fixed(c.broadcast_time) + " and the preprocess backward " +
             fixed(c.recompute_time) + " per step";
    out += "\n";
  }
  if (family(w) == "mpipe T>=1") {
    out += "  MPipe moves the preprocess forward (" + fixed(w.costs.pre_f) +
           " per micro-batch) off rank 0's critical path onto ranks idle in the warmup";
    if (w.broadcast_time + w.recompute_time > 0)
      out += ", for a broadcast of " + fixed(w.broadcast_time) + " and a preprocess backward of " +
             fixed(w.recompute_time) + " on rank 0 per step";
    out += ".\n";
  }
  return out;
}

}  // namespace hp::schedule
