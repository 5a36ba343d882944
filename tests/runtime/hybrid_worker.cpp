// One rank of the Hybrid distributed equivalence tests (hybrid_dist_test).
//
//   hybrid_worker SCHEDULE VPP TP CASE...   CASE = PATTERN:MHC:DEALLOC:MB
//
// For each case: one pipelined step of the Hybrid model in double precision,
// its stages split over TP tensor-parallel ranks (the job is TP x PP ranks,
// comm/mesh.hpp); this rank's loss and every gradient it holds (its shard of
// a split one) must equal the single-process step of the same pattern
// (1e-10 relative). The rank gets only the data it
// reads. Prints "OK   ..." / "FAIL ..." per case; exits 1 on the first failure.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "comm/mesh.hpp"
#include "model/gpt_stages.hpp"
#include "model/hybrid_stages.hpp"
#include "model/lm_loss.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/reference.hpp"
#include "runtime/tensor_shard.hpp"
#include "runtime/worker_group.hpp"

using namespace hp;

namespace {

std::string check(const std::string& text, const std::string& kind, int vpp, const comm::Mesh& mesh) {
  comm::ProcessGroup* pg = mesh.group(comm::MeshDim::PP);  // null at pp 1
  const int tp = mesh.shape().tp, tp_rank = mesh.coord().tp, stage_rank = mesh.coord().pp;
  std::vector<std::string> f;
  std::stringstream in(text);
  for (std::string cell; std::getline(in, cell, ':');) f.push_back(cell);
  if (f.size() != 4) throw std::invalid_argument("bad case " + text);
  runtime::PipelineOptions o;
  if (!schedule::kind_from_name(kind, &o.schedule.kind)) throw std::invalid_argument(kind);
  o.schedule.pp = mesh.shape().pp;
  o.schedule.vpp = vpp;
  o.schedule.micro_batches = std::stoi(f[3]);
  o.executor.pseudo_deallocate = f[2] == "1";
  model::HybridStagesOptions h;
  auto& c = h.config;
  c.pattern = f[0];
  c.base.hidden_size = 8;
  c.base.num_attention_heads = 2;
  c.base.vocab_size = 16;
  c.base.max_seq_len = 8;
  c.base.dtype = model::DType::Float64;
  c.base.seed = 31;
  c.base.enable_mhc_connections = f[1] == "1";
  c.base.mhc_num_residual_streams = 2;
  c.base.mhc_init_gating_factor = 0.5;
  c.base.tensor_parallel = {tp, false, tp_rank, mesh.group(comm::MeshDim::TP)};
  runtime::Pipeline p(o, stage_rank, pg, model::build_hybrid_stages(h, o.schedule, stage_rank));
  const auto tokens = testing::make_micro_tokens(o.schedule.micro_batches, 2, {6}, 16, 3);
  const auto r = p.step(testing::rank_share(p, model::lm_micro_batches(tokens)));
  p.reduce_tied_grads();

  model::HybridConfig rc = c;
  rc.base.tensor_parallel = {};
  rc.aux_loss_scale = 1.0 / o.schedule.micro_batches;
  auto ref = model::build_reference_hybrid(rc);
  double ref_loss = 0;
  for (const auto& t : tokens) {
    const auto n = t.size(1);
    const auto labels = t.slice(1, 1, n);
    auto loss = model::lm_loss(ref->forward(t.slice(1, 0, n - 1), labels), labels) / static_cast<double>(tokens.size());
    torch::autograd::backward({loss});
    ref_loss += loss.item<double>();
  }
  double worst = std::abs(r.loss - ref_loss) / (1 + std::abs(ref_loss));
  std::string worst_name = "loss";
  auto ref_params = ref->named_parameters();
  const auto& shards = p.tensor_parallel_shards();
  if (tp > 1 && shards.empty()) return " no parameter is split over the tp group";
  for (const auto& [name, t] : p.named_parameters()) {
    if (!ref_params.contains(name)) return " unknown parameter " + name;
    if (!t.grad().defined()) return " " + name + " has no gradient";
    at::Tensor want = ref_params[name].grad();
    if (const auto it = shards.find(name); it != shards.end()) want = runtime::shard_of(want, it->second, tp_rank, tp);
    // Relative to the gradient's own scale too: the Mamba mixers' gradients
    // are tiny at initialisation (dt ~ 1e-3), where an absolute error hides.
    const double e = std::max(testing::max_rel_error(t.grad(), want), testing::max_scaled_error(t.grad(), want));
    if (e > worst) worst = e, worst_name = name;
  }
  if (!(worst < 1e-10)) {
    std::ostringstream os;
    os << " max rel error " << worst << " (" << worst_name << ")";
    return os.str();
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: hybrid_worker SCHEDULE VPP TP PATTERN:MHC:DEALLOC:MB...\n";
    return 2;
  }
  try {
    auto world = testing::join_worker_group();
    comm::MeshShape shape;
    shape.tp = std::atoi(argv[3]);
    shape.pp = world.world_size() / shape.tp;
    const comm::Mesh mesh = comm::Mesh::create(world, shape);
    for (int i = 4; i < argc; ++i) {
      const std::string err = check(argv[i], argv[1], std::atoi(argv[2]), mesh);
      std::cout << (err.empty() ? "OK   " : "FAIL ") << argv[1] << " pp=" << shape.pp << " vpp=" << argv[2]
                << " tp=" << shape.tp << " case " << argv[i] << " rank " << world.rank() << err << std::endl;
      if (!err.empty()) return 1;
      world.barrier();
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "hybrid_worker: " << e.what() << "\n";
    return 1;
  }
}
