// Pipelining your own LibTorch model with hyperpipe.
//
// A residual MLP regressor that hyperpipe does not ship, split into stages by
// this file's own code and trained with 1F1B or interleaved 1F1B across local
// processes:
//
//   hyperpipe launch --nproc 2 -- ./custom_model --schedule 1f1b
//   hyperpipe launch --nproc 4 -- ./custom_model --schedule interleaved --vpp 2 --mb 6
//   ./custom_model                       # one process, no pipelining
//
// Every rank builds the whole (small) model from the same seed and hands the
// runtime the stages it runs; parameters keep the whole model's names. With
// --verify, step 1's loss and this rank's gradients are compared with the same
// model run in one process (double precision), and the program fails past 1e-10.
#include <torch/torch.h>

#include <hyperpipe/hyperpipe.hpp>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string schedule = "1f1b";  // 1f1b | interleaved | gpipe
  int vpp = 1;
  int mb = 4;          // micro-batches per step
  int rows = 4;        // samples per micro-batch
  int blocks = 8;      // residual blocks, split over pp * vpp stages
  int width = 16;
  int features = 6;
  int steps = 20;
  double lr = 1e-2;
  bool verify = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--schedule") a.schedule = value();
    else if (k == "--vpp") a.vpp = std::stoi(value());
    else if (k == "--mb") a.mb = std::stoi(value());
    else if (k == "--blocks") a.blocks = std::stoi(value());
    else if (k == "--steps") a.steps = std::stoi(value());
    else if (k == "--lr") a.lr = std::stod(value());
    else if (k == "--verify") a.verify = true;
    else throw std::invalid_argument("unknown flag " + k + " (flags: --schedule --vpp --mb --blocks --steps --lr --verify)");
  }
  return a;
}

// x + tanh(W x + b): a block whose output is never a view of its input.
struct ResidualImpl : torch::nn::Module {
  explicit ResidualImpl(int width) : fc(register_module("fc", torch::nn::Linear(width, width))) {}
  torch::Tensor forward(const torch::Tensor& x) { return x + torch::tanh(fc(x)); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Residual);

// The whole model's modules, created in one order from one seed on every rank.
struct Model {
  torch::nn::Linear embed{nullptr};
  std::vector<Residual> blocks;
  torch::nn::Linear head{nullptr};
};

Model build_model(const Args& a) {
  torch::manual_seed(7);
  Model m;
  m.embed = torch::nn::Linear(a.features, a.width);
  for (int b = 0; b < a.blocks; ++b) m.blocks.push_back(Residual(a.width));
  m.head = torch::nn::Linear(a.width, 1);
  m.embed->to(torch::kDouble);
  for (auto& b : m.blocks) b->to(torch::kDouble);
  m.head->to(torch::kDouble);
  return m;
}

// Stage s of n: an even share of the blocks, stage 0 also the embedding, the
// last stage the head. It shares the model's modules and keeps the names every
// layout has (embed, block0 .. blockN-1, head); n = 1 is the whole model.
torch::nn::Sequential stage_modules(const Model& model, const Args& a, int s, int n) {
  torch::nn::Sequential stage;
  if (s == 0) stage->push_back("embed", model.embed);
  for (int b = s * a.blocks / n; b < (s + 1) * a.blocks / n; ++b)
    stage->push_back("block" + std::to_string(b), model.blocks[b]);
  if (s == n - 1) stage->push_back("head", model.head);
  return stage;
}

// Batch `step`: y = sin(x . w) for fixed w, x fresh per step (same on every rank).
std::vector<hp::runtime::MicroBatch> make_batch(const Args& a, int step) {
  auto gen = at::detail::createCPUGenerator(1000 + step);
  auto w = at::linspace(-1, 1, a.features, at::kDouble);
  std::vector<hp::runtime::MicroBatch> micros(a.mb);
  for (auto& m : micros) {
    m.input = at::randn({a.rows, a.features}, gen, at::TensorOptions().dtype(at::kDouble));
    m.target = at::sin(at::matmul(m.input, w)).unsqueeze(1);
  }
  return micros;
}

torch::Tensor loss_fn(const torch::Tensor& out, const torch::Tensor& target) { return torch::mse_loss(out, target); }

// The oracle: the same model, same batch, one process, no pipelining.
double verify(const Args& a, const std::vector<hp::runtime::MicroBatch>& micros, double loss,
              const std::map<std::string, at::Tensor>& mine) {
  auto ref = stage_modules(build_model(a), a, 0, 1);
  double ref_loss = 0;
  for (const auto& m : micros) {
    auto l = loss_fn(ref->forward(m.input), m.target) / static_cast<double>(micros.size());
    l.backward();
    ref_loss += l.item<double>();
  }
  double worst = std::abs(loss - ref_loss) / (1 + std::abs(ref_loss));
  const auto ref_params = ref->named_parameters();
  for (const auto& [name, p] : mine) {
    const at::Tensor& g = ref_params[name].grad();
    worst = std::max(worst, ((p.grad() - g).abs() / (g.abs() + 1)).max().item<double>());
  }
  return worst;
}

int run(const Args& a) {
  torch::set_num_threads(1);
  const bool distributed = hp::comm::has_environment();
  std::unique_ptr<hp::comm::ProcessGroup> pg;
  if (distributed) pg = std::make_unique<hp::comm::ProcessGroup>(hp::comm::ProcessGroup::create(hp::comm::DistEnv::from_environment()));
  const int rank = pg ? pg->rank() : 0, world = pg ? pg->world_size() : 1;

  hp::runtime::PipelineOptions options;
  auto& layout = options.schedule;
  if (!hp::schedule::kind_from_name(world == 1 ? "no-pipelining" : a.schedule, &layout.kind))
    throw std::invalid_argument("--schedule " + a.schedule + ": use 1f1b, interleaved or gpipe");
  layout.pp = world;
  layout.vpp = world == 1 ? 1 : a.vpp;
  layout.micro_batches = a.mb;

  // This rank's stages: chunk c runs global stage c * pp + rank.
  auto model = build_model(a);
  hp::runtime::RankModel mine;
  const int n = layout.num_stages();
  for (int c = 0; c < layout.vpp; ++c) {
    const int s = c * layout.pp + rank;
    mine.stages.push_back(hp::runtime::module_stage(s, stage_modules(model, a, s, n)));
  }
  mine.loss = loss_fn;  // output shapes are learned on the first step
  hp::runtime::Pipeline pipeline(options, rank, pg.get(), mine);

  const auto params = pipeline.named_parameters();
  std::vector<at::Tensor> tensors;
  for (const auto& [name, p] : params) tensors.push_back(p);
  torch::optim::Adam adam(tensors, torch::optim::AdamOptions(a.lr));
  for (int step = 1; step <= a.steps; ++step) {
    auto micros = make_batch(a, step);
    const auto result = pipeline.step(micros);
    if (step == 1 && a.verify) {
      const double err = verify(a, micros, result.loss, params);
      std::cout << (err < 1e-10 ? "verify OK" : "verify FAIL") << ": rank " << rank << " loss and " << params.size()
                << " gradients, max relative error " << err << std::endl;
      if (!(err < 1e-10)) return 1;
    }
    adam.step();
    adam.zero_grad();
    if (rank == 0) std::cout << "step " << step << " loss " << result.loss << std::endl;
  }
  if (pg) pg->barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "custom_model: " << e.what() << std::endl;
    return 1;
  }
}
