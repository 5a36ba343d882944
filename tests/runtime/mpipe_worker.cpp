// One rank of the MPipe distributed tests (mpipe_dist_test), started through
// the local launcher. Modes:
//
//   mpipe_worker equiv VPP CASE...   CASE = MB:T:OVERFLOW:OWNER:TIE:ACCUM[:VARLEN]
//     ACCUM pipelined steps (different batches) accumulate gradients; loss of
//     each step and every gradient (preprocess and body) must equal the
//     single-process reference (double, 1e-10 relative). Replicas start with
//     wrong values, so a missing broadcast shows. Also checked: every global
//     parameter is reported by exactly one rank, and the broadcast byte count.
//   mpipe_worker vl VPP CASE...      CASE = MB:T:OVERFLOW:OWNER:FROZEN:ACCUM
//     the same for the VL model (T counts tower blocks); every rank is given
//     only the images of the micros it owns. A frozen tower must be broadcast
//     once per run, a trainable one every step, T = 0 never.
//   mpipe_worker mismatch VPP T      rank 1 builds a preprocess of T + 1
//     layers; every rank must fail at construction naming rank 1.
//
// Prints "OK   ..." / "FAIL ..." per case; exits 1 on the first failure.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "comm/dist_env.hpp"
#include "comm/process_group.hpp"
#include "model/gpt_stages.hpp"
#include "model/preprocess.hpp"
#include "model/vl_stages.hpp"
#include "model/vl_tensors.hpp"
#include "runtime/mpipe_runtime.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/mpipe_vl_reference.hpp"
#include "runtime/reference.hpp"
#include "runtime/worker_group.hpp"

using namespace hp;

namespace {

struct Case {
  int mb = 4, t = 1;
  std::string overflow = "full";
  bool owner = false, tie = false, frozen = false;  // the fifth field: TIE for GPT, FROZEN for VL
  int accum = 1;
  bool varlen = false;  // micro-batches of different lengths, shapes sent with meta
  std::string body = "interleaved";  // the pipeline MPipe transposes around
  std::string text;
};

Case parse_case(const std::string& s, bool vl) {
  Case c;
  c.text = s;
  std::vector<std::string> f;
  std::stringstream in(s);
  std::string cell;
  while (std::getline(in, cell, ':')) f.push_back(cell);
  if (f.size() < 6) throw std::invalid_argument("bad case " + s);
  c.mb = std::stoi(f[0]);
  c.t = std::stoi(f[1]);
  c.overflow = f[2];
  c.owner = f[3] == "1";
  (vl ? c.frozen : c.tie) = f[4] == "1";
  c.accum = std::stoi(f[5]);
  c.varlen = f.size() > 6 && f[6] == "1";
  if (f.size() > 7) c.body = f[7];
  return c;
}

struct Setup {
  runtime::PipelineOptions pipeline;
  model::VLStagesOptions model;  // model.text: the GPT, or the VL model's text body
  bool vl = false;

  runtime::RankModel build(int rank) const {
    return vl ? model::build_vl_stages(model, pipeline.schedule, rank)
              : model::build_gpt_stages(model.text, pipeline.schedule, rank);
  }
};

// Stage 0's first chunk holds 3 layers (so T = 0, 1, 2 all leave body0 a
// layer), every other stage 1: explicit counts, not the even split.
Setup options(const Case& c, int pp, int vpp, schedule::ScheduleKind kind, bool vl = false) {
  Setup s;
  s.vl = vl;
  runtime::PipelineOptions& o = s.pipeline;
  o.schedule.kind = kind;
  o.schedule.pp = pp;
  o.schedule.vpp = vpp;
  o.schedule.micro_batches = c.mb;
  o.schedule.mpipe.transpose_layers = c.t;
  o.schedule.mpipe.overflow = c.overflow == "min" ? schedule::Overflow::Min : schedule::Overflow::Full;
  o.schedule.mpipe.owner_backward = c.owner;
  if (!schedule::kind_from_name(c.body, &o.schedule.mpipe.body)) throw std::invalid_argument("bad body " + c.body);
  o.executor.variable_seq_len = c.varlen;
  o.executor.pseudo_deallocate = c.varlen;
  auto& g = s.model.text;
  g.layers_per_stage.assign(pp * vpp, 1);
  g.layers_per_stage[0] = 3;
  auto& m = g.config;
  m.num_layers = pp * vpp + 2;
  m.hidden_size = 16;
  m.num_attention_heads = 2;
  m.vocab_size = 32;
  m.max_seq_len = 8;
  m.tie_embeddings = c.tie;
  m.dtype = model::DType::Float64;
  m.seed = 23;
  if (vl) {
    // One text layer per stage; 2 tower blocks over 8x8 images of 4 patches.
    // The caption shapes are given, the GPT's are learned.
    g.layers_per_stage.assign(pp * vpp, 1);
    m.num_layers = pp * vpp;
    m.tie_embeddings = false;
    m.vocab_size = static_cast<int>(data::vl_vocabulary().size());
    auto& v = s.model.vision;
    v.num_layers = 2;
    v.image_size = 8;
    v.patch_size = 4;
    v.hidden_size = 8;
    v.num_attention_heads = 2;
    v.frozen = c.frozen;
    m.max_seq_len = v.num_patches() + data::kVLCaptionTokens - 1;
    g.micro_batch_rows = 2;
    g.seq_len = data::kVLCaptionTokens - 1;
  }
  return s;
}

double all_reduce_sum(comm::ProcessGroup& pg, double x) {
  at::Tensor t = at::full({1}, x, at::kDouble);
  pg.all_reduce(t);
  return t.item<double>();
}

std::string equiv(const Case& c, int vpp, comm::ProcessGroup& pg, bool vl) {
  const int rank = pg.rank(), pp = pg.world_size();
  const Setup o = options(c, pp, vpp, schedule::ScheduleKind::MPipe, vl);
  const auto& cfg = o.model.text.config;
  runtime::Pipeline p(o.pipeline, rank, &pg, o.build(rank));
  // A replica that the broadcast failed to overwrite would show in the result.
  if (rank != 0 && p.mpipe()->preprocess()) {
    at::NoGradGuard g;
    for (auto& [name, t] : p.mpipe()->preprocess()->parameters) t.add_(0.5);
  }
  std::map<std::string, at::Tensor> ref_grads;
  std::ostringstream err;
  for (int a = 0; a < c.accum; ++a) {
    std::vector<at::Tensor> micros, images;
    std::vector<runtime::MicroBatch> share;
    testing::ReferenceStep ref;
    runtime::StepResult r;
    // Spec D4: a rank reads the data of the micros it owns, nothing else.
    if (vl) {
      for (int m = 0; m < c.mb; ++m) {
        auto b = testing::make_vl_tensors(o.model.vision.image_size, 2, 7, 2 * (a * c.mb + m), at::kDouble);
        micros.push_back(b.captions);
        images.push_back(b.images);
      }
      share = testing::rank_share(p, model::vl_micro_batches(micros, images));
      ref = testing::vl_reference_step(cfg, o.model.vision, micros, images);
    } else {
      micros = testing::make_micro_tokens(c.mb, 2, c.varlen ? std::vector<int>{7, 3, 5} : std::vector<int>{6},
                                          cfg.vocab_size, 100 + a);
      share = testing::rank_share(p, model::lm_micro_batches(micros));
      ref = testing::reference_step(cfg, micros);
    }
    r = p.step(share);
    const double e = std::abs(r.loss - ref.loss) / (1 + std::abs(ref.loss));
    if (!(e < 1e-10)) err << " loss of run " << a << " off by " << e;
    // The forward-only schedule over the same micros: the same loss, and the
    // accumulated gradients stay as they are (checked below).
    const double ev = std::abs(p.evaluate(share).loss - ref.loss) / (1 + std::abs(ref.loss));
    if (!(ev < 1e-10)) err << " forward-only loss of run " << a << " off by " << ev;
    for (auto& [n, g] : ref.grads) {
      auto [it, fresh] = ref_grads.emplace(n, g.clone());
      if (!fresh) it->second += g;
    }
    std::uint64_t want = 0;
    if (c.t > 0 && !(c.frozen && a > 0))
      for (auto& [n, t] : p.mpipe()->parameters()) want += t.numel() * t.element_size() * (pp - 1);
    if (r.bytes_broadcast != want) err << " bytes_broadcast " << r.bytes_broadcast << " != " << want;
  }
  p.reduce_tied_grads();
  double worst = 0;
  std::string worst_name = "-";
  const auto params = p.named_parameters();
  for (const auto& [name, t] : params) {
    if (!ref_grads.count(name)) {
      // A frozen tower parameter: no gradient in the reference, none here.
      if (!(c.frozen && name.rfind("vision.", 0) == 0 && !t.requires_grad()))
        err << " unknown parameter " << name;
      else if (t.grad().defined())
        err << " frozen " << name << " has a gradient";
      continue;
    }
    if (!t.grad().defined()) {
      err << " " << name << " has no gradient";
      continue;
    }
    const double e = testing::max_rel_error(t.grad(), ref_grads.at(name));
    if (e > worst) worst = e, worst_name = name;
  }
  if (!(worst < 1e-10)) err << " max rel error " << worst << " (" << worst_name << ")";
  // Each global parameter once over the ranks (the tied copy is a duplicate).
  int frozen_held = 0;
  for (const auto& [name, t] : params) frozen_held += !t.requires_grad();
  const double held = all_reduce_sum(
      pg, static_cast<double>(params.size() - p.duplicate_parameter_names().size() - frozen_held));
  if (held != static_cast<double>(ref_grads.size()))
    err << " ranks report " << held << " trainable parameters, the model has " << ref_grads.size();
  if (c.frozen && c.t > 0 && p.mpipe()->broadcast_stats().broadcasts != 1)
    err << " the frozen tower was broadcast " << p.mpipe()->broadcast_stats().broadcasts << " times";
  if (rank != 0 && c.t > 0)
    for (auto& [name, t] : p.mpipe()->parameters())
      if (params.count(name) && !(c.tie && name == "embedding.word.weight" && rank == pp - 1))
        err << " rank " << rank << " reports the replica's " << name;
  return err.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: mpipe_worker equiv|vl|mismatch VPP CASE...\n";
    return 2;
  }
  try {
    auto pg = testing::join_worker_group();
    const auto& env = pg.env();
    const std::string mode = argv[1];
    const int vpp = std::atoi(argv[2]);
    if (mode == "mismatch") {
      Case c;
      c.t = std::atoi(argv[3]);
      const Setup o = options(c, env.world_size, vpp, schedule::ScheduleKind::MPipe);
      runtime::RankModel m = o.build(env.rank);
      if (env.rank == 1)
        m.preprocess = model::runtime_preprocess(std::make_shared<model::GPTPreprocess>(o.model.text.config, c.t + 1));
      try {
        runtime::Pipeline p(o.pipeline, env.rank, &pg, m);
        std::cout << "FAIL mismatch: rank " << env.rank << " built a pipeline" << std::endl;
        return 1;
      } catch (const std::invalid_argument& e) {
        std::cout << "EXPECTED " << e.what() << std::endl;
        return 0;
      }
    }
    for (int i = 3; i < argc; ++i) {
      const Case c = parse_case(argv[i], mode == "vl");
      const std::string err = equiv(c, vpp, pg, mode == "vl");
      std::cout << (err.empty() ? "OK   " : "FAIL ") << mode << " pp=" << env.world_size << " vpp=" << vpp
                << " case " << c.text << " rank " << env.rank << err << std::endl;
      if (!err.empty()) return 1;
      pg.barrier();
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mpipe_worker: " << e.what() << "\n";
    return 1;
  }
}
