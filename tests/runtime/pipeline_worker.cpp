// One rank of the distributed equivalence tests. Started by
// pipeline_dist_test through the local launcher (RANK, WORLD_SIZE, ... set).
//
//   pipeline_worker SCHEDULE VPP MB TIE DEALLOC VARLEN MHC MTP [MB TIE DEALLOC VARLEN MHC MTP ...]
//
//   pipeline_worker reshape learned|given
//
//   pipeline_worker memory SCHEDULE:MB:DEALLOC...
//
//   pipeline_worker lookahead N
//

// For each case: one pipelined step in double precision, then this rank's
// loss and the gradient of every parameter it holds are compared with the
// single-process reference step, which every rank computes itself (same seed,
// same batch). A rank is given only the data it reads (Pipeline::input_micros,
// reads_targets). Fixed-length cases alternate between receive shapes given
// by the model and shapes the runtime learns on the first step. Prints one
// line per case; exits 1 on the first mismatch.
//
// memory: for each case, the tensor bytes this rank holds at its peak during
// the second step above what it held before it (the first step learns the
// shapes and allocates the gradients), printed as
//   MEMORY <schedule> mb=<MB> dealloc=<0|1> rank <r> peak_bytes <n> output_bytes <n>
//
// lookahead: one traced 1F1B step of 8 micro-batches (after a first that
// learns the shapes) with ExecutorOptions::recv_lookahead N, printed as
//   LOOKAHEAD <N> rank <r> receives <n> ahead <n>
// (ahead: receives posted before the list reached them).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "comm/dist_env.hpp"
#include "comm/process_group.hpp"
#include "model/gpt_stages.hpp"
#include "runtime/action_trace.hpp"
#include "runtime/executor.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/reference.hpp"
#include "runtime/tensor_memory.hpp"
#include "runtime/worker_group.hpp"

using namespace hp;

namespace {

// The second step's micro-batches are one token shorter than the shapes
// learned in the first step (or, `given`, than the model's output_spec), so
// the first send refuses, naming what the receiver expects, instead of
// handing Gloo a message of another size. Exits 3 after printing the refusal.
int reshape(comm::ProcessGroup& pg, bool given) {
  runtime::PipelineOptions o;
  o.schedule.kind = schedule::ScheduleKind::OneFOneB;
  o.schedule.pp = pg.world_size();
  o.schedule.micro_batches = 2;
  model::GPTStagesOptions g;
  g.config = testing::tiny_gpt_config(false, 3);
  g.config.num_layers = pg.world_size();
  if (given) g.micro_batch_rows = 2, g.seq_len = 6;
  runtime::Pipeline p(o, pg.rank(), &pg, model::build_gpt_stages(g, o.schedule, pg.rank()));
  for (int seq : {6, 5}) {
    try {
      p.step(model::lm_micro_batches(testing::make_micro_tokens(2, 2, {seq}, g.config.vocab_size, 1)));
    } catch (const std::invalid_argument& e) {
      std::cout << "REFUSED " << e.what() << std::endl;
      return 3;
    }
  }
  return 0;
}

int memory(comm::ProcessGroup& pg, int argc, char** argv) {
  namespace mem = runtime::tensor_memory;
  mem::install();
  for (int i = 2; i < argc; ++i) {
    std::string kind, mb, dealloc;
    std::istringstream in(argv[i]);
    std::getline(in, kind, ':'), std::getline(in, mb, ':'), std::getline(in, dealloc, ':');
    runtime::PipelineOptions o;
    if (!schedule::kind_from_name(kind, &o.schedule.kind)) throw std::invalid_argument(kind);
    o.schedule.pp = pg.world_size();
    o.schedule.vpp = schedule::default_vpp(o.schedule);  // 2 for zbv and dualpipev: a layer per chunk
    o.schedule.micro_batches = std::stoi(mb);
    o.executor.pseudo_deallocate = dealloc == "1";
    model::GPTStagesOptions g;
    g.config = testing::tiny_gpt_config(false, 3);
    g.config.num_layers = 2 * pg.world_size();
    g.config.hidden_size = 64;
    g.config.max_seq_len = 32;
    g.config.dtype = model::DType::Float32;
    g.micro_batch_rows = 2, g.seq_len = 32;
    runtime::Pipeline p(o, pg.rank(), &pg, model::build_gpt_stages(g, o.schedule, pg.rank()));
    const auto micros = model::lm_micro_batches(
        testing::make_micro_tokens(o.schedule.micro_batches, 2, {32}, g.config.vocab_size, 1));
    p.step(micros);
    pg.barrier();
    const std::int64_t before = mem::live_bytes();
    mem::reset_peak();
    p.step(micros);
    const std::int64_t peak = mem::peak_bytes() - before;
    std::cout << "MEMORY " << kind << " mb=" << mb << " dealloc=" << dealloc << " rank " << pg.rank()
              << " peak_bytes " << peak << " output_bytes " << 32 * 2 * 64 * 4 << std::endl;
    pg.barrier();
  }
  return 0;
}

int lookahead(comm::ProcessGroup& pg, int n) {
  runtime::PipelineOptions o;
  o.schedule.kind = schedule::ScheduleKind::OneFOneB;
  o.schedule.pp = pg.world_size();
  o.schedule.micro_batches = 8;
  o.executor.recv_lookahead = n;
  model::GPTStagesOptions g;
  g.config = testing::tiny_gpt_config(false, 3);
  g.config.num_layers = pg.world_size();
  runtime::Pipeline p(o, pg.rank(), &pg, model::build_gpt_stages(g, o.schedule, pg.rank()));
  const auto micros = model::lm_micro_batches(testing::make_micro_tokens(8, 2, {6}, g.config.vocab_size, 1));
  p.step(micros);
  runtime::ActionTrace trace;
  p.executor().set_trace(&trace);
  p.step(micros);
  int receives = 0, ahead = 0;
  for (const auto& e : trace.events()) {
    if (e.category != "post") continue;
    if (e.action.type != schedule::ActionType::RECV_F && e.action.type != schedule::ActionType::RECV_B) continue;
    ++receives;
    ahead += e.name.size() > 8 && e.name.compare(e.name.size() - 7, 7, "(ahead)") == 0;
  }
  std::cout << "LOOKAHEAD " << n << " rank " << pg.rank() << " receives " << receives << " ahead " << ahead
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "lookahead") {
    auto pg = testing::join_worker_group();
    return lookahead(pg, std::atoi(argv[2]));
  }
  if (argc == 3 && std::string(argv[1]) == "reshape") {
    auto pg = testing::join_worker_group();
    return reshape(pg, std::string(argv[2]) == "given");
  }
  if (argc >= 3 && std::string(argv[1]) == "memory") {
    auto pg = testing::join_worker_group();
    return memory(pg, argc, argv);
  }
  if (argc < 9 || (argc - 3) % 6 != 0) {
    std::cerr << "usage: pipeline_worker SCHEDULE VPP {MB TIE DEALLOC VARLEN MHC MTP}... | pipeline_worker reshape learned|given\n";
    return 2;
  }
  try {
    auto pg = testing::join_worker_group();
    const auto& env = pg.env();
    for (int i = 3, k = 0; i + 5 < argc; i += 6, ++k) {
      runtime::PipelineOptions o;
      if (!schedule::kind_from_name(argv[1], &o.schedule.kind)) throw std::invalid_argument(argv[1]);
      o.schedule.pp = env.world_size;
      o.schedule.vpp = std::atoi(argv[2]);
      o.schedule.micro_batches = std::atoi(argv[i]);
      model::GPTStagesOptions g;
      auto& m = g.config;
      m.num_layers = 2 * o.schedule.pp * o.schedule.vpp;
      m.hidden_size = 16;
      m.num_attention_heads = 2;
      m.vocab_size = 32;
      m.max_seq_len = 8;
      m.tie_embeddings = std::atoi(argv[i + 1]);
      m.dtype = model::DType::Float64;
      m.seed = 17 + i;
      m.enable_mhc_connections = std::atoi(argv[i + 4]);
      m.mhc_num_residual_streams = 3;
      m.mhc_init_gating_factor = 0.5;  // mappings far from uniform, so a wrong mix shows
      m.mtp_num_layers = std::atoi(argv[i + 5]);
      // Every other mHC case recomputes the first layer's hyper-connections of each chunk.
      const bool recompute = m.enable_mhc_connections && k % 2 == 1;
      if (recompute) m.recompute_modules = "mhc", m.mhc_recompute_layer_num = 1;
      o.executor.pseudo_deallocate = std::atoi(argv[i + 2]);
      o.executor.variable_seq_len = std::atoi(argv[i + 3]);
      const bool given_shapes = !o.executor.variable_seq_len && k % 2 == 0;
      if (given_shapes) g.micro_batch_rows = 2, g.seq_len = 6;
      const std::string name = std::string(argv[1]) + " pp=" + std::to_string(o.schedule.pp) +
                               " vpp=" + argv[2] + " mb=" + argv[i] + " tie=" + argv[i + 1] +
                               " dealloc=" + argv[i + 2] + " varlen=" + argv[i + 3] + " mhc=" + argv[i + 4] + (recompute ? "+recompute" : "") + " mtp=" + argv[i + 5] +
                               (given_shapes ? " shapes=given" : " shapes=learned");
      runtime::Pipeline p(o, env.rank, &pg, model::build_gpt_stages(g, o.schedule, env.rank));
      const std::vector<int> lens = o.executor.variable_seq_len ? std::vector<int>{7, 3, 5} : std::vector<int>{6};
      auto micros = testing::make_micro_tokens(o.schedule.micro_batches, 2, lens, m.vocab_size, 5 + i);
      const auto share = testing::rank_share(p, model::lm_micro_batches(micros));
      const auto r = p.step(share);
      // Forward only over the same micros: the same loss, the step's gradients untouched.
      const auto eval = p.evaluate(share);
      const auto outputs = p.forward(share);
      p.reduce_tied_grads();
      const auto ref = testing::reference_step(m, micros);
      double worst = std::abs(r.loss - ref.loss) / (1 + std::abs(ref.loss));
      std::string worst_name = "loss";
      if (const double e = std::abs(eval.loss - ref.loss) / (1 + std::abs(ref.loss)); e > worst)
        worst = e, worst_name = "forward-only loss";
      if (eval.tokens != r.tokens) worst = 1, worst_name = "forward-only tokens";
      const size_t want_outputs = p.reads_targets() ? micros.size() : 0;
      if (outputs.size() != want_outputs) worst = 1, worst_name = "forward outputs";
      for (const auto& [pname, t] : p.named_parameters()) {
        if (!t.grad().defined()) {
          std::cerr << name << ": " << pname << " has no gradient\n";
          return 1;
        }
        const double e = testing::max_rel_error(t.grad(), ref.grads.at(pname));
        if (e > worst) worst = e, worst_name = pname;
      }
      const bool ok = worst < 1e-10;
      std::cout << (ok ? "OK   " : "FAIL ") << name << " rank " << env.rank << " max rel error " << worst << " ("
                << worst_name << ")" << std::endl;
      if (!ok) return 1;
      pg.barrier();
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "pipeline_worker: " << e.what() << "\n";
    return 1;
  }
}
