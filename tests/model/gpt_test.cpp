#include "model/gpt.hpp"

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <set>

#include "model/lm_loss.hpp"
#include "model/test_util.hpp"

namespace hp::model {
namespace {

using testing::expect_invalid;
using Chunks = std::vector<std::shared_ptr<GPTChunk>>;

TransformerConfig small_config(int layers, bool tie) {
  TransformerConfig c;
  c.num_layers = layers;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.vocab_size = 32;
  c.max_seq_len = 8;
  c.tie_embeddings = tie;
  c.dtype = DType::Float64;
  return c;
}

at::Tensor tokens_for(const TransformerConfig& c, int64_t batch, int64_t seq, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randint(c.vocab_size, {batch, seq}, gen, at::TensorOptions().dtype(at::kLong));
}

std::set<std::string> names_of(const torch::nn::Module& m) {
  std::set<std::string> out;
  for (const auto& item : m.named_parameters()) out.insert(item.key());
  return out;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// One training step through chained chunks, the way the runtime runs it:
// detach at each boundary, pseudo-deallocate each sent output, then backward
// stage by stage from the last. Gradients are collected by global name and
// summed over copies (the tied embedding).
struct StepResult {
  at::Tensor logits;
  double loss = 0;
  std::map<std::string, at::Tensor> grads;
};

StepResult run_chain(const Chunks& chunks, const at::Tensor& tokens, const at::Tensor& labels) {
  std::vector<at::Tensor> inputs, outputs;
  at::Tensor x = tokens;
  for (std::size_t s = 0; s < chunks.size(); ++s) {
    at::Tensor in = s == 0 ? tokens : x.detach().requires_grad_(true);
    if (s > 0) outputs.back().set_data(at::empty({1}, outputs.back().options()));  // "sent"
    inputs.push_back(in);
    outputs.push_back(chunks[s]->forward(in));
    x = outputs.back();
  }
  StepResult r;
  r.logits = outputs.back().detach().clone();
  const auto loss = lm_loss(outputs.back(), labels);
  r.loss = loss.item<double>();
  torch::autograd::backward({loss});
  for (int s = static_cast<int>(chunks.size()) - 2; s >= 0; --s) {
    const auto grad = inputs[s + 1].grad();
    EXPECT_TRUE(grad.defined()) << "stage " << s + 1 << " input has no gradient";
    torch::autograd::backward({outputs[s]}, {grad});
  }
  for (const auto& chunk : chunks) {
    for (const auto& item : chunk->named_parameters()) {
      EXPECT_TRUE(item.value().grad().defined()) << item.key();
      auto& g = r.grads[item.key()];
      g = g.defined() ? g + item.value().grad() : item.value().grad().clone();
    }
  }
  return r;
}

TEST(GPTNames, GlobalNamesAreIdenticalForEveryLayout) {
  for (bool tie : {false, true}) {
    SCOPED_TRACE(tie ? "tied" : "untied");
    const auto c = small_config(8, tie);
    const auto ref = names_of(*build_reference_gpt(c));
    EXPECT_EQ(ref.size(), std::size_t(2 + 12 * 8 + 2 + (tie ? 0 : 1)));
    for (const char* n : {"embedding.word.weight", "embedding.position.weight",
                          "layers.0.attn_norm.weight", "layers.7.attention.qkv.weight",
                          "layers.7.attention.proj.bias", "layers.3.mlp.fc2.weight",
                          "layers.5.mlp_norm.bias", "final_norm.weight", "final_norm.bias"}) {
      EXPECT_EQ(ref.count(n), 1u) << n;
    }
    EXPECT_EQ(ref.count("lm_head.weight"), tie ? 0u : 1u);

    for (const auto& p :
         {Partition::even(8, 4, 2), Partition::from_counts(8, 4, 2, {0, 2, 0, 3, 0, 3, 0, 0})}) {
      SCOPED_TRACE(p.describe());
      std::set<std::string> all;
      std::map<std::string, int> holders;
      for (const auto& chunk : build_gpt_chunks(c, p)) {
        for (const auto& n : names_of(*chunk)) {
          all.insert(n);
          ++holders[n];
        }
      }
      EXPECT_EQ(all, ref);
      for (const auto& [name, count] : holders) {
        const bool shared = tie && name == "embedding.word.weight";
        EXPECT_EQ(count, shared ? 2 : 1) << name;
      }
    }
  }
}

TEST(GPTNames, ChunksHoldTheirPartitionsLayers) {
  const auto c = small_config(8, false);
  const auto p = Partition::from_counts(8, 2, 2, {3, 0, 4, 1});
  const auto chunks = build_gpt_chunks(c, p);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(names_of(*chunks[1]).size(), 0u);  // empty middle stage: no parameters
  const auto s2 = names_of(*chunks[2]);
  EXPECT_EQ(s2.count("layers.3.attention.qkv.weight"), 1u);
  EXPECT_EQ(s2.count("layers.6.mlp.fc1.bias"), 1u);
  EXPECT_EQ(s2.count("layers.7.mlp.fc1.bias"), 0u);
  EXPECT_EQ(s2.size(), 4u * 12);
  EXPECT_EQ(chunks[2]->layer_begin(), 3);
  EXPECT_EQ(chunks[2]->layer_end(), 7);
  EXPECT_TRUE(chunks[0]->is_first());
  EXPECT_FALSE(chunks[0]->is_last());
  EXPECT_TRUE(chunks[3]->is_last());
  EXPECT_EQ(chunks[3]->stage(), 3);

  const auto rank1 = build_rank_chunks(c, p, 1);
  ASSERT_EQ(rank1.size(), 2u);
  EXPECT_EQ(rank1[0]->stage(), 1);
  EXPECT_EQ(rank1[1]->stage(), 3);
  EXPECT_TRUE(rank1[1]->is_last());
}

TEST(GPTNames, TiedParameterNames) {
  const auto untied = build_gpt_chunks(small_config(4, false), Partition::even(4, 2, 1));
  for (const auto& chunk : untied) EXPECT_TRUE(chunk->tied_parameter_names().empty());
  const auto tied = build_gpt_chunks(small_config(4, true), Partition::even(4, 3, 1));
  const std::vector<std::string> word = {"embedding.word.weight"};
  EXPECT_EQ(tied[0]->tied_parameter_names(), word);
  EXPECT_TRUE(tied[1]->tied_parameter_names().empty());
  EXPECT_EQ(tied[2]->tied_parameter_names(), word);
  EXPECT_EQ(names_of(*tied[2]).count("embedding.word.weight"), 1u);
  EXPECT_EQ(names_of(*tied[2]).count("embedding.position.weight"), 0u);
  // One chunk holding both ends uses the one parameter: nothing to reduce.
  EXPECT_TRUE(build_reference_gpt(small_config(4, true))->tied_parameter_names().empty());
}

TEST(GPTInit, InitialValuesDependOnlyOnSeedAndName) {
  for (bool tie : {false, true}) {
    const auto c = small_config(8, tie);
    const auto ref = build_reference_gpt(c);
    const auto ref_params = ref->named_parameters();
    for (const auto& chunk : build_gpt_chunks(c, Partition::even(8, 4, 2))) {
      for (const auto& item : chunk->named_parameters()) {
        const auto* want = ref_params.find(item.key());
        ASSERT_NE(want, nullptr) << item.key();
        EXPECT_TRUE(at::equal(item.value(), *want)) << item.key();
        EXPECT_TRUE(at::equal(item.value(),
                              initial_parameter_value(item.key(), item.value().sizes(), c)))
            << item.key();
      }
    }
  }
}

TEST(GPTInit, InitialValueRules) {
  const auto c = small_config(4, false);
  const auto ref = build_reference_gpt(c);
  const auto params = ref->named_parameters();
  for (const auto& item : params) {
    EXPECT_EQ(item.value().scalar_type(), at::kDouble) << item.key();
    EXPECT_TRUE(item.value().requires_grad()) << item.key();
  }
  EXPECT_TRUE(at::equal(params["layers.2.attn_norm.weight"], at::ones({16}, at::kDouble)));
  EXPECT_TRUE(at::equal(params["final_norm.bias"], at::zeros({16}, at::kDouble)));
  EXPECT_TRUE(at::equal(params["layers.1.mlp.fc1.bias"], at::zeros({64}, at::kDouble)));
  // Same shape, different names: different values.
  EXPECT_FALSE(at::equal(params["layers.0.attention.qkv.weight"],
                         params["layers.1.attention.qkv.weight"]));
  const double qkv_std = params["layers.0.attention.qkv.weight"].std().item<double>();
  EXPECT_NEAR(qkv_std, 0.02, 0.002);
  const double word_std = params["embedding.word.weight"].std().item<double>();
  EXPECT_NEAR(word_std, 0.02, 0.003);
  const double proj_std = params["layers.0.attention.proj.weight"].std().item<double>();
  EXPECT_NEAR(proj_std, 0.02 / std::sqrt(8.0), 0.0015);
  // Another seed gives other values; float32 is the float64 init rounded.
  auto c2 = c;
  c2.seed = 99;
  EXPECT_FALSE(at::equal(build_reference_gpt(c2)->named_parameters()["lm_head.weight"],
                         params["lm_head.weight"]));
  auto c32 = c;
  c32.dtype = DType::Float32;
  const auto p32 = build_reference_gpt(c32)->named_parameters();
  for (const auto& item : p32) {
    EXPECT_EQ(item.value().scalar_type(), at::kFloat) << item.key();
    EXPECT_TRUE(at::equal(item.value(), params[item.key()].to(at::kFloat))) << item.key();
  }
}

TEST(GPTInit, BuildingAModelLeavesTheGlobalGeneratorAlone) {
  at::manual_seed(7);
  const auto a = at::randn({8});
  at::manual_seed(7);
  build_reference_gpt(small_config(4, true));
  const auto b = at::randn({8});
  EXPECT_TRUE(at::equal(a, b));
}

TEST(GPTChain, ChunksOfPp2Vpp2MatchTheSingleModel) {
  for (bool tie : {false, true}) {
    const auto c = small_config(4, tie);
    const auto tokens = tokens_for(c, 3, 6, 11);
    const auto labels = tokens_for(c, 3, 6, 12);
    const auto ref = run_chain({build_reference_gpt(c)}, tokens, labels);
    EXPECT_EQ(ref.logits.sizes(), (std::vector<int64_t>{3, 6, 32}));
    for (const auto& p :
         {Partition::even(4, 2, 2), Partition::from_counts(4, 2, 2, {1, 0, 2, 1}),
          Partition::from_counts(4, 2, 2, {0, 2, 2, 0})}) {
      SCOPED_TRACE(std::string(tie ? "tied " : "untied ") + p.describe());
      const auto got = run_chain(build_gpt_chunks(c, p), tokens, labels);
      EXPECT_LE(max_abs_diff(got.logits, ref.logits), 1e-12);
      EXPECT_NEAR(got.loss, ref.loss, 1e-12 * std::abs(ref.loss));
      ASSERT_EQ(got.grads.size(), ref.grads.size());
      for (const auto& [name, g] : ref.grads) {
        const auto it = got.grads.find(name);
        ASSERT_NE(it, got.grads.end()) << name;
        const double scale = g.abs().max().item<double>();
        EXPECT_GT(scale, 0.0) << name;
        EXPECT_LE(max_abs_diff(it->second, g), 1e-12 * scale) << name;
      }
    }
  }
}

TEST(GPTForward, DeclaredShapesMatchForward) {
  const auto c = small_config(4, true);
  const auto chunks = build_gpt_chunks(c, Partition::from_counts(4, 2, 2, {1, 0, 2, 1}));
  at::NoGradGuard no_grad;
  at::Tensor x = tokens_for(c, 2, 5, 3);
  for (const auto& chunk : chunks) {
    EXPECT_EQ(x.sizes(), chunk->input_shape(2, 5)) << "stage " << chunk->stage();
    x = chunk->forward(x);
    EXPECT_EQ(x.sizes(), chunk->output_shape(2, 5)) << "stage " << chunk->stage();
    EXPECT_EQ(x.scalar_type(), chunk->activation_dtype());
  }
  EXPECT_EQ(chunks.back()->output_shape(2, 5), (std::vector<int64_t>{2, 5, 32}));
  EXPECT_EQ(chunks[1]->input_shape(2, 5), (std::vector<int64_t>{2, 5, 16}));
}

// The same model in float32: its parameters are the float64 model's rounded
// (each drawn in double from the seed and its name), so its logits differ from
// the float64 model's by float32's rounding only.
TEST(GPTForward, Float32RunsInFloat32WithinRoundingOfFloat64) {
  auto c = small_config(2, false);
  const auto exact = build_reference_gpt(c);
  c.dtype = DType::Float32;
  const auto model = build_reference_gpt(c);
  at::NoGradGuard no_grad;
  const auto tokens = tokens_for(c, 2, 4, 9);
  const auto logits = model->forward(tokens);
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  const auto want = exact->forward(tokens);
  ASSERT_EQ(want.scalar_type(), at::kDouble);
  // float32's unit roundoff is 6e-8; a few hundred roundings through two
  // layers stay far below 1e-5 of the logits' scale.
  const double scale = want.abs().max().item<double>();
  const double err = (logits.to(at::kDouble) - want).abs().max().item<double>();
  EXPECT_LT(err, 1e-5 * scale) << "max |float32 - float64| " << err << " of logits up to " << scale;
  EXPECT_GT(err, 0) << "the float32 model computed in double";
}

TEST(GPTForward, CausalMaskHidesFutureTokens) {
  const auto c = small_config(2, false);
  const auto model = build_reference_gpt(c);
  at::NoGradGuard no_grad;
  const auto tokens = tokens_for(c, 2, 8, 5);
  auto changed = tokens.clone();
  changed.select(1, 5).copy_((tokens.select(1, 5) + 1).remainder(c.vocab_size));
  const auto a = model->forward(tokens);
  const auto b = model->forward(changed);
  EXPECT_LE(max_abs_diff(a.narrow(1, 0, 5), b.narrow(1, 0, 5)), 1e-12);
  for (int64_t t = 5; t < 8; ++t) {
    EXPECT_GT(max_abs_diff(a.select(1, t), b.select(1, t)), 1e-6) << "position " << t;
  }
}

TEST(GPTForward, SequenceLengthMayVary) {
  const auto c = small_config(2, false);
  const auto chunks = build_gpt_chunks(c, Partition::even(2, 2, 1));
  at::NoGradGuard no_grad;
  const auto tokens = tokens_for(c, 2, 8, 6);
  const auto full = chunks[1]->forward(chunks[0]->forward(tokens));
  for (int64_t seq : {1, 3, 7}) {
    const auto part = chunks[1]->forward(chunks[0]->forward(tokens.narrow(1, 0, seq)));
    EXPECT_EQ(part.sizes(), (std::vector<int64_t>{2, seq, 32}));
    EXPECT_LE(max_abs_diff(part, full.narrow(1, 0, seq)), 1e-12) << "seq " << seq;
  }
  expect_invalid([&] { chunks[0]->forward(tokens_for(c, 2, 9, 1)); },
                 {"stage 0", "sequence length 9", "model.max_seq_len 8"});
}

TEST(GPTForward, MicroBatchesSplitAlongDimZero) {
  const auto c = small_config(2, true);
  const auto model = build_reference_gpt(c);
  at::NoGradGuard no_grad;
  const auto tokens = tokens_for(c, 4, 5, 8);
  const auto full = model->forward(tokens);
  for (int64_t m = 0; m < 2; ++m) {
    EXPECT_LE(max_abs_diff(model->forward(tokens.narrow(0, 2 * m, 2)), full.narrow(0, 2 * m, 2)),
              1e-12);
  }
}

TEST(GPTForward, EmptyStageOutputIsIndependentAndConnected) {
  at::manual_seed(107);  // a failure reproduces
  const auto c = small_config(2, false);
  const auto chunks = build_gpt_chunks(c, Partition::from_counts(2, 3, 1, {1, 0, 1}));
  const auto& empty = chunks[1];
  EXPECT_EQ(empty->layer_begin(), empty->layer_end());
  const auto x = at::randn({2, 4, 16}, at::TensorOptions().dtype(at::kDouble)).requires_grad_(true);
  const auto keep = x.detach().clone();
  auto out = empty->forward(x);
  EXPECT_FALSE(out.is_same(x));
  EXPECT_FALSE(out.is_alias_of(x));
  EXPECT_NE(out.data_ptr(), x.data_ptr());
  EXPECT_TRUE(at::equal(out, x));
  ASSERT_NE(out.grad_fn(), nullptr);
  // Pseudo-deallocate the "sent" output: the input stays intact, backward still works.
  out.set_data(at::empty({1}, out.options()));
  EXPECT_TRUE(at::equal(x, keep));
  const auto g = at::randn({2, 4, 16}, at::TensorOptions().dtype(at::kDouble));
  torch::autograd::backward({out}, {g});
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(at::equal(x.grad(), g));
  // A middle stage with layers does not alias its input either.
  const auto with_layers = build_gpt_chunks(c, Partition::from_counts(2, 3, 1, {0, 2, 0}))[1];
  const auto y = with_layers->forward(x);
  EXPECT_FALSE(y.is_alias_of(x));
  EXPECT_NE(y.grad_fn(), nullptr);
}

TEST(GPTForward, RejectsBadInputs) {
  const auto c = small_config(2, false);
  const auto chunks = build_gpt_chunks(c, Partition::even(2, 2, 1));
  at::NoGradGuard no_grad;
  const auto hidden = at::zeros({2, 4, 16}, at::TensorOptions().dtype(at::kDouble));
  expect_invalid([&] { chunks[0]->forward(hidden); }, {"stage 0", "int64 token ids"});
  expect_invalid([&] { chunks[0]->forward(tokens_for(c, 2, 4, 1).add(32)); },
                 {"token ids", "model.vocab_size 32"});
  expect_invalid([&] { chunks[0]->forward(at::Tensor()); }, {"undefined"});
  expect_invalid([&] { chunks[1]->forward(tokens_for(c, 2, 4, 1)); },
                 {"stage 1", "[batch, seq, 16]", "model.hidden_size"});
  expect_invalid([&] { chunks[1]->forward(hidden.to(at::kFloat)); }, {"Double", "model.dtype"});
  expect_invalid([&] { chunks[1]->forward(hidden.narrow(2, 0, 8)); }, {"model.hidden_size", "[2, 4, 8]"});
}

TEST(GPTChunkCtor, ValidatesConfigPartitionAndStage) {
  auto c = small_config(4, false);
  expect_invalid([&] { GPTChunk(c, Partition::even(6, 2, 1), 0); },
                 {"splits 6 layers", "model.num_layers is 4"});
  expect_invalid([&] { GPTChunk(c, Partition::even(4, 2, 1), 2); }, {"stage 2", "2 stages"});
  c.num_attention_heads = 3;
  expect_invalid([&] { build_reference_gpt(c); }, {"model.num_attention_heads 3", "model.hidden_size 16"});
}

}  // namespace
}  // namespace hp::model
