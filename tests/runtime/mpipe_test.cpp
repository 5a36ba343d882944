// Single-process MPipe checks: the recompute backward (spec D1) gives the
// preprocess exactly the gradients plain autograd gives it through the whole
// model, and the option checks reject bad MPipe layouts before any process
// group exists.
#include <gtest/gtest.h>

#include <torch/csrc/autograd/autograd.h>

#include "model/gpt.hpp"
#include "model/gpt_stages.hpp"
#include "model/lm_loss.hpp"
#include "model/preprocess.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/reference.hpp"

namespace hp::runtime {
namespace {

model::TransformerConfig tiny(bool tie) { return testing::tiny_gpt_config(tie, 5); }

struct RecomputeCase {
  int t;
  bool tie;
};

class Recompute : public ::testing::TestWithParam<RecomputeCase> {};

// Per micro: the preprocess runs detached (no graph, as on a transposed
// owner), body0 and the rest of the model run on the detached features, then
// the preprocess is recomputed from the input with grad and backpropagated
// with the gradient body0 left on its input.
TEST_P(Recompute, DetachedForwardPlusRecomputeEqualsPlainAutograd) {
  const auto [t, tie] = GetParam();
  const auto cfg = tiny(tie);
  auto micros = testing::make_micro_tokens(3, 2, {6}, cfg.vocab_size, 9);
  const auto ref = testing::reference_step(cfg, micros);

  model::GPTPreprocess pre(cfg, t);
  model::ChunkLayout rest;
  rest.embedding = false;
  rest.head = true;
  rest.layer_begin = t;
  rest.layer_end = cfg.num_layers;
  model::GPTChunk body(cfg, rest);
  std::int64_t tokens = 0;
  for (const auto& m : micros) tokens += m.size(0) * (m.size(1) - 1);
  double loss_sum = 0;
  for (const auto& m : micros) {
    const auto n = m.size(1);
    const at::Tensor input = m.slice(1, 0, n - 1), labels = m.slice(1, 1, n);
    at::Tensor features;
    {
      at::NoGradGuard no_grad;
      features = pre.forward(input);
    }
    EXPECT_FALSE(features.requires_grad());
    at::Tensor x = features.detach().requires_grad_(true);
    // A tied head uses its own copy of the word embedding, as on the last stage.
    at::Tensor loss = model::lm_loss(body.forward(x), labels) * (double(labels.numel()) / tokens);
    torch::autograd::backward({loss});
    loss_sum += loss.item<double>();
    at::Tensor again = pre.forward(input);
    torch::autograd::backward({again}, {x.grad()});
  }
  EXPECT_NEAR(loss_sum, ref.loss, 1e-12);
  std::map<std::string, at::Tensor> grads;
  for (const auto& [name, p] : pre.named_parameters()) grads[name] = p.grad().clone();
  for (const auto& p : body.named_parameters()) {
    auto [it, fresh] = grads.emplace(p.key(), p.value().grad().clone());
    if (!fresh) it->second += p.value().grad();  // the tied copies' sum
  }
  ASSERT_EQ(grads.size(), ref.grads.size());
  for (const auto& [name, g] : ref.grads) {
    ASSERT_TRUE(grads.count(name)) << name;
    EXPECT_LT(testing::max_rel_error(grads.at(name), g), 1e-10) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, Recompute,
                         ::testing::Values(RecomputeCase{1, false}, RecomputeCase{2, false}, RecomputeCase{3, true}));

TEST(GPTPreprocess, HoldsTheEmbeddingAndTheFirstTLayersUnderGlobalNames) {
  model::GPTPreprocess pre(tiny(false), 2);
  std::set<std::string> names;
  for (const auto& [name, p] : pre.named_parameters()) names.insert(name);
  EXPECT_TRUE(names.count("embedding.word.weight"));
  EXPECT_TRUE(names.count("embedding.position.weight"));
  EXPECT_TRUE(names.count("layers.1.mlp.fc2.weight"));
  EXPECT_FALSE(names.count("layers.2.mlp.fc2.weight"));
  EXPECT_FALSE(names.count("final_norm.weight"));
  const auto out = pre.output_spec(3, 5);
  EXPECT_EQ(out.shape, (std::vector<std::int64_t>{3, 5, 16}));
  EXPECT_EQ(out.dtype, at::kDouble);
  EXPECT_THROW(model::GPTPreprocess(tiny(false), 0), std::invalid_argument);
  EXPECT_THROW(model::GPTPreprocess(tiny(false), 4), std::invalid_argument);
}

// The checks a GPT under MPipe gets before any process group: the runtime's
// (the schedule) and the model's (T against stage 0's first chunk).
void check(const schedule::ScheduleOptions& s, const model::GPTStagesOptions& g) {
  PipelineOptions o;
  o.schedule = s;
  validate_pipeline_options(o);
  model::check_gpt_layout(g, s);
}

void expect_rejected(const schedule::ScheduleOptions& s, const model::GPTStagesOptions& g, const std::string& needle) {
  try {
    check(s, g);
    ADD_FAILURE() << "accepted; expected an error containing: " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(MPipePipelineOptions, BadLayoutsAreRejectedBeforeAnyProcessGroup) {
  model::GPTStagesOptions g;
  g.config = tiny(false);
  g.config.num_layers = 8;
  schedule::ScheduleOptions s;
  s.kind = schedule::ScheduleKind::MPipe;
  s.pp = 2;
  s.vpp = 2;
  s.micro_batches = 4;
  s.mpipe.transpose_layers = 1;
  EXPECT_NO_THROW(check(s, g));
  s.mpipe.transpose_layers = 2;  // chunk 0 holds 2 of the 8 layers
  expect_rejected(s, g, "schedule.mpipe.transpose_layers must be < 2, the layers of stage 0's first chunk");
  g.layers_per_stage = {3, 1, 2, 2};  // explicit counts: the real chunk decides
  EXPECT_NO_THROW(check(s, g));
  s.mpipe.transpose_layers = 3;
  expect_rejected(s, g, "schedule.mpipe.transpose_layers must be < 3");
  g.layers_per_stage.clear();
  s.mpipe.transpose_layers = 0;
  s.mpipe.owner_backward = true;
  expect_rejected(s, g, "schedule.mpipe.owner_backward needs schedule.mpipe.transpose_layers >= 1");
  s.mpipe.owner_backward = false;
  s.pp = 1;
  expect_rejected(s, g, "MPipe Transpose needs schedule.pp >= 2");
  s.pp = 2;
  s.mpipe.transpose_layers = -1;
  expect_rejected(s, g, "schedule.mpipe.transpose_layers must be >= 0");
}

TEST(MPipePipelineOptions, APreprocessModuleIsOnlyTakenByMPipe) {
  PipelineOptions o;
  o.schedule.kind = schedule::ScheduleKind::NoPipelining;
  o.schedule.pp = 1;
  o.schedule.vpp = 1;
  o.schedule.micro_batches = 2;
  model::GPTStagesOptions g;
  g.config = tiny(false);
  RankModel m = model::build_gpt_stages(g, o.schedule, 0);
  m.preprocess = model::runtime_preprocess(std::make_shared<model::GPTPreprocess>(g.config, 1));
  EXPECT_THROW(Pipeline(o, 0, nullptr, m), std::invalid_argument);
}

TEST(ChunkLayout, RejectsLayersOutsideTheModel) {
  model::ChunkLayout l;
  l.layer_begin = 3;
  l.layer_end = 5;
  EXPECT_THROW(model::GPTChunk(tiny(false), l), std::invalid_argument);
  l.layer_begin = 3;
  l.layer_end = 2;
  EXPECT_THROW(model::GPTChunk(tiny(false), l), std::invalid_argument);
}

}  // namespace
}  // namespace hp::runtime
