// One rank of the Hybrid distributed equivalence tests (hybrid_dist_test).
//
//   hybrid_worker SCHEDULE VPP CASE...   CASE = PATTERN:MHC:DEALLOC:MB
//
// For each case: one pipelined step of the Hybrid model in double precision;
// this rank's loss and every gradient it holds must equal the single-process
// step of the same pattern (1e-10 relative). The rank gets only the data it
// reads. Prints "OK   ..." / "FAIL ..." per case; exits 1 on the first failure.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "model/gpt_stages.hpp"
#include "model/hybrid_stages.hpp"
#include "model/lm_loss.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/reference.hpp"
#include "runtime/worker_group.hpp"

using namespace hp;

namespace {

std::string check(const std::string& text, const std::string& kind, int vpp, comm::ProcessGroup& pg) {
  std::vector<std::string> f;
  std::stringstream in(text);
  for (std::string cell; std::getline(in, cell, ':');) f.push_back(cell);
  if (f.size() != 4) throw std::invalid_argument("bad case " + text);
  runtime::PipelineOptions o;
  if (!schedule::kind_from_name(kind, &o.schedule.kind)) throw std::invalid_argument(kind);
  o.schedule.pp = pg.world_size();
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
  runtime::Pipeline p(o, pg.rank(), &pg, model::build_hybrid_stages(h, o.schedule, pg.rank()));
  const auto tokens = testing::make_micro_tokens(o.schedule.micro_batches, 2, {6}, 16, 3);
  const auto r = p.step(testing::rank_share(p, model::lm_micro_batches(tokens)));
  p.reduce_tied_grads();

  model::HybridConfig rc = c;
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
  for (const auto& [name, t] : p.named_parameters()) {
    if (!ref_params.contains(name)) return " unknown parameter " + name;
    if (!t.grad().defined()) return " " + name + " has no gradient";
    const double e = testing::max_rel_error(t.grad(), ref_params[name].grad());
    if (e > worst) worst = e, worst_name = name;
  }
  if (!(worst < 1e-10)) return " max rel error " + std::to_string(worst) + " (" + worst_name + ")";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: hybrid_worker SCHEDULE VPP PATTERN:MHC:DEALLOC:MB...\n";
    return 2;
  }
  try {
    auto pg = testing::join_worker_group();
    for (int i = 3; i < argc; ++i) {
      const std::string err = check(argv[i], argv[1], std::atoi(argv[2]), pg);
      std::cout << (err.empty() ? "OK   " : "FAIL ") << argv[1] << " pp=" << pg.world_size() << " vpp=" << argv[2]
                << " case " << argv[i] << " rank " << pg.rank() << err << std::endl;
      if (!err.empty()) return 1;
      pg.barrier();
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "hybrid_worker: " << e.what() << "\n";
    return 1;
  }
}
