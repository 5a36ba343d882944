// One rank of the mesh equivalence tests (mesh_dist_test), started through
// the local launcher on tp * dp * pp ranks laid out as comm/mesh.hpp says.
//
//   mesh_worker SCHEDULE PP VPP DP TP CP CASE...
//   CASE = MB:TIE:MHC:MTP:ACCUM:BUCKET_BYTES[:SP]
//
// The GPT's attention heads, MLP width and vocabulary are split over the tp
// group; each rank's shard of every gradient is compared with its shard of
// the reference gradient. SP 1: sequence parallelism too (the activations
// between stages are [rows, seq / tp, width]). With CP > 1 each sequence is
// split over the cp group (model/context_parallel.hpp) and gradients are
// averaged over dp x cp.
// MB is the micro-batches of one replica. ACCUM steps (different global
// batches of DP x MB micro-batches) run on one pipeline, all but the last
// with sync_grads false; replica d reads micro-batches [d * MB, (d + 1) * MB)
// of each, and only what its rank reads. Each step's loss must equal the
// single-process step over the whole global batch and, after the last, every
// gradient the sum of the reference steps' (double, 1e-10 relative). With a
// bucket smaller than the model, some bucket must have been launched from a
// gradient hook (while a backward ran). Prints "OK   ..." / "FAIL ..." per
// case; exits 1 on the first failure.
#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "comm/mesh.hpp"
#include "comm/process_group.hpp"
#include "model/gpt_stages.hpp"
#include "model/tensor_parallel.hpp"
#include "runtime/grad_reducer.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/reference.hpp"
#include "runtime/tensor_shard.hpp"
#include "runtime/worker_group.hpp"

using namespace hp;

namespace {

std::vector<int> fields(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string cell;
  while (std::getline(in, cell, ':')) out.push_back(std::stoi(cell));
  if (out.size() == 6) out.push_back(0);
  if (out.size() != 7) throw std::invalid_argument("bad case " + s + " (MB:TIE:MHC:MTP:ACCUM:BUCKET_BYTES[:SP])");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::cerr << "usage: mesh_worker SCHEDULE PP VPP DP TP CP MB:TIE:MHC:MTP:ACCUM:BUCKET_BYTES[:SP]...\n";
    return 2;
  }
  try {
    auto world = testing::join_worker_group();
    comm::MeshShape shape;
    shape.pp = std::atoi(argv[2]);
    shape.dp = std::atoi(argv[4]);
    shape.tp = std::atoi(argv[5]);
    shape.cp = std::atoi(argv[6]);
    const comm::Mesh mesh = comm::Mesh::create(world, shape);
    const int replica = mesh.coord().dp, stage_rank = mesh.coord().pp;
    for (int i = 7; i < argc; ++i) {
      const auto f = fields(argv[i]);
      runtime::PipelineOptions o;
      if (!schedule::kind_from_name(argv[1], &o.schedule.kind)) throw std::invalid_argument(argv[1]);
      o.schedule.pp = shape.pp;
      o.schedule.vpp = std::atoi(argv[3]);
      o.schedule.micro_batches = f[0];
      o.grad_bucket_bytes = f[5];
      model::GPTStagesOptions g;
      auto& m = g.config;
      m = testing::tiny_gpt_config(f[1], 31 + i);
      m.num_layers = 2 * shape.pp * o.schedule.vpp;
      m.enable_mhc_connections = f[2];
      m.mhc_num_residual_streams = 3;
      m.mhc_init_gating_factor = 0.5;
      m.mtp_num_layers = f[3];
      m.tensor_parallel = {shape.tp, f[6] == 1, mesh.coord().tp, mesh.group(comm::MeshDim::TP)};
      m.context_parallel = {shape.cp, mesh.coord().cp, mesh.group(comm::MeshDim::CP)};
      const int accum = f[4];
      runtime::Pipeline p(o, stage_rank, mesh.group(comm::MeshDim::PP), model::build_gpt_stages(g, o.schedule, stage_rank),
                          mesh.data_parallel_with_context());
      std::map<std::string, at::Tensor> ref_grads;
      double worst = 0;
      std::string worst_name;
      for (int a = 0; a < accum; ++a) {
        const auto global = testing::make_micro_tokens(shape.dp * f[0], 2, {shape.cp > 1 ? 8 : 6}, m.vocab_size, 100 * i + a);
        const std::vector<at::Tensor> mine(global.begin() + replica * f[0], global.begin() + (replica + 1) * f[0]);
        const auto r = p.step(testing::rank_share(p, model::lm_micro_batches(mine)), a == accum - 1);
        model::TransformerConfig whole = m;
        whole.tensor_parallel = {};
        whole.context_parallel = {};
        const auto ref = testing::reference_step(whole, global);
        if (const double e = std::abs(r.loss - ref.loss) / (1 + std::abs(ref.loss)); e > worst)
          worst = e, worst_name = "loss of step " + std::to_string(a);
        for (const auto& [name, grad] : ref.grads)
          ref_grads[name] = ref_grads.count(name) ? ref_grads[name] + grad : grad;
      }
      p.reduce_tied_grads();
      const auto shards = p.tensor_parallel_shards();
      model::sum_sequence_parallel_grads(p.named_parameters(), shards, m.tensor_parallel);
      if (shape.tp > 1 && shards.empty()) throw std::runtime_error("no parameter is split over the tp group");
      for (const auto& [pname, t] : p.named_parameters()) {
        if (!t.grad().defined()) throw std::runtime_error(pname + " has no gradient");
        at::Tensor want = ref_grads.at(pname);
        if (const auto it = shards.find(pname); it != shards.end())
          want = runtime::shard_of(want, it->second, mesh.coord().tp, shape.tp);
        const double e = testing::max_rel_error(t.grad(), want);
        if (e > worst) worst = e, worst_name = pname;
      }
      const auto* reducer = p.grad_reducer();
      const int buckets = reducer ? reducer->num_buckets() : 0;
      const int hooked = reducer ? reducer->launched_in_backward() : 0;
      bool ok = worst < 1e-10;
      // A split backward's weight products run in its W, outside autograd: its
      // buckets launch at the flush after the stage's last W, not from hooks.
      const bool split = schedule::splits_backward(o.schedule.kind);
      if (buckets > 1 && hooked == 0 && !split) ok = false, worst_name += "; no bucket was launched during a backward";
      std::cout << (ok ? "OK   " : "FAIL ") << argv[1] << " pp=" << shape.pp << " vpp=" << argv[3] << " dp=" << shape.dp
                << " tp=" << shape.tp << " cp=" << shape.cp << " case " << argv[i] << " rank " << world.rank() << " (replica " << replica
                << ", stage rank " << stage_rank << ", tp rank " << mesh.coord().tp << ") buckets " << buckets << " launched in backward " << hooked << " max rel error "
                << worst << " (" << worst_name << ")" << std::endl;
      if (!ok) return 1;
      world.barrier();
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "mesh_worker: " << e.what() << "\n";
    return 1;
  }
}
