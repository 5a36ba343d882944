// hyperpipe with one more model family: a residual MLP regressor that
// hyperpipe does not ship, registered before the command line is parsed.
// Everything else (train, verify, bench, the launcher, checkpoints) is the
// hyperpipe binary's own:
//
//   family_worker train --model residual-mlp --nproc 2 --schedule 1f1b
//
// The model: x -> embed -> blocks of x + tanh(W x + b) -> head, on y =
// sin(x . w); model.num_layers blocks of width model.hidden_size, each stage
// an even share of the blocks (stage 0 also the embedding, the last the head).
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "family/model_family.hpp"
#include "model/layers.hpp"
#include "runtime/module_stage.hpp"
#include "train/lm_data.hpp"
#include "train/task.hpp"

namespace {

constexpr int kFeatures = 6;

struct ResidualImpl : torch::nn::Module {
  explicit ResidualImpl(int width) : fc(register_module("fc", torch::nn::Linear(width, width))) {}
  torch::Tensor forward(const torch::Tensor& x) { return x + torch::tanh(fc(x)); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Residual);

class ResidualMlpTask : public hp::train::Task {
 public:
  ResidualMlpTask(int blocks, int width, int rows, hp::model::DType dtype, std::uint64_t seed)
      : blocks_(blocks), width_(width), rows_(rows), dtype_(hp::model::to_scalar_type(dtype)), seed_(seed) {}

  void validate(const hp::schedule::ScheduleOptions& layout) const override {
    if (blocks_ < layout.num_stages())
      throw std::invalid_argument("model.num_layers " + std::to_string(blocks_) + ": fewer blocks than the " +
                                  std::to_string(layout.num_stages()) + " stages");
  }

  hp::runtime::RankModel build(const hp::schedule::ScheduleOptions& layout, int rank,
                               const hp::model::ModelParallel&) const override {
    // The whole model from one seed on every rank, so every layout starts equal.
    torch::manual_seed(static_cast<std::int64_t>(seed_));
    auto embed = torch::nn::Linear(kFeatures, width_);
    std::vector<Residual> blocks;
    for (int b = 0; b < blocks_; ++b) blocks.push_back(Residual(width_));
    auto head = torch::nn::Linear(width_, 1);
    hp::runtime::RankModel mine;
    const int n = layout.num_stages();
    for (int c = 0; c < layout.vpp; ++c) {
      const int s = layout.stage_of(rank, c);
      torch::nn::Sequential stage;
      if (s == 0) stage->push_back("embed", embed);
      for (int b = s * blocks_ / n; b < (s + 1) * blocks_ / n; ++b) stage->push_back("block" + std::to_string(b), blocks[b]);
      if (s == n - 1) stage->push_back("head", head);
      stage->to(dtype_);
      mine.stages.push_back(hp::runtime::module_stage(s, stage));
    }
    mine.loss = [](const at::Tensor& out, const at::Tensor& target) { return torch::mse_loss(out, target); };
    return mine;
  }

  std::vector<hp::runtime::MicroBatch> batch(std::int64_t index, int micro_batches,
                                             const hp::runtime::Reads& reads) const override {
    return sample(seed_ + 1000 + static_cast<std::uint64_t>(index), micro_batches, reads);
  }
  std::vector<hp::runtime::MicroBatch> eval_batch(std::int64_t index, int micro_batches,
                                                  const hp::runtime::Reads& reads) const override {
    return sample((seed_ ^ hp::train::kHeldOutSeedMix) + static_cast<std::uint64_t>(index), micro_batches, reads);
  }
  bool has_eval_data() const override { return true; }
  std::string checkpoint_metadata() const override {
    return nlohmann::json{{"model", "residual-mlp"}, {"blocks", blocks_}, {"width", width_}}.dump();
  }
  std::string describe() const override {
    return "residual MLP: model.num_layers " + std::to_string(blocks_) + ", model.hidden_size " + std::to_string(width_);
  }

 private:
  std::vector<hp::runtime::MicroBatch> sample(std::uint64_t seed, int micro_batches, const hp::runtime::Reads& reads) const {
    auto gen = at::detail::createCPUGenerator(seed);
    const auto w = at::linspace(-1, 1, kFeatures, at::TensorOptions().dtype(dtype_));
    std::vector<hp::runtime::MicroBatch> micros(micro_batches);
    for (auto& m : micros) {
      m.input = at::randn({rows_, kFeatures}, gen, at::TensorOptions().dtype(dtype_));
      m.target = at::sin(at::matmul(m.input, w)).unsqueeze(1);
    }
    hp::train::keep_what_is_read(micros, reads);
    return micros;
  }

  int blocks_, width_, rows_;
  at::ScalarType dtype_;
  std::uint64_t seed_;
};

}  // namespace

int main(int argc, char** argv) {
  hp::family::ModelFamily f;
  f.name = "residual-mlp";
  f.title = "residual MLP";
  f.help = "a residual MLP regressor (tests/family/family_worker.cpp)";
  f.make_task = [](const hp::family::FamilyOptions& o) -> std::unique_ptr<hp::train::Task> {
    return std::make_unique<ResidualMlpTask>(o.model.num_layers, o.model.hidden_size, o.data->micro_batch_size,
                                             o.model.dtype, o.model.seed);
  };
  f.profile = [](const hp::family::FamilyOptions& o) {
    return hp::family::emulated_profile(o.model.emulate, o.model.num_layers);
  };
  hp::family::register_family(std::move(f));
  return hp::cli::run_hyperpipe(argc, argv);
}
