// AdamW against torch::optim::AdamW (the only TU here that pulls in torch/optim).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adamw.h>

#include <functional>

#include "train/adamw.hpp"

namespace hp::train {
namespace {

NamedParams make_params(std::uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  NamedParams p;
  p["layers.0.mlp.fc1.weight"] = at::randn({4, 3}, gen, opts);
  p["layers.0.mlp.fc1.bias"] = at::randn({4}, gen, opts);
  p["layers.0.attn_norm.weight"] = at::randn({3}, gen, opts);
  p["word_embeddings.weight"] = at::randn({5, 3}, gen, opts);
  // Beside the names the old rule knew: a 1-D parameter named like neither (an
  // mHC alpha) and a 2-D one named "norm".
  p["layers.0.attn_hc.alpha_pre"] = at::randn({3}, gen, opts);
  p["layers.0.norm_proj.weight"] = at::randn({3, 3}, gen, opts);
  for (auto& [n, t] : p) t.requires_grad_(true);
  return p;
}

// Grads of step s: deterministic, different per parameter and step.
at::Tensor grad_for(const at::Tensor& p, int param_index, int s) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + 31 * param_index + s);
  return at::randn(p.sizes(), gen, p.options());
}

// Parameter 3 gets no grad on step 2, to check skipping matches torch.
bool has_grad(int param_index, int s) { return !(param_index == 3 && s == 2); }

void set_grads(std::vector<at::Tensor> params, int s) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (has_grad(static_cast<int>(i), s)) {
      params[i].mutable_grad() = grad_for(params[i], static_cast<int>(i), s);
    } else {
      params[i].mutable_grad() = at::Tensor();
    }
  }
}

std::vector<at::Tensor> values(const NamedParams& p) {
  std::vector<at::Tensor> v;
  for (const auto& [n, t] : p) v.push_back(t);
  return v;
}

// Megatron-LM's param groups (megatron/core/optimizer/__init__.py,
// _get_param_groups, no_weight_decay_cond unset): no decay for a name that
// ends with ".bias" or a parameter of one dimension.
bool megatron_no_decay(const std::string& n, const at::Tensor& t) {
  return (n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0) || t.dim() == 1;
}

void expect_same_as_torch(bool no_decay_rule) {
  NamedParams ours = make_params(7);
  NamedParams ref_named = make_params(7);
  std::vector<at::Tensor> ref = values(ref_named);
  const std::vector<double> lrs = {1e-2, 3e-2, 2e-2, 5e-3, 1e-3};

  AdamWOptions o;  // torch defaults: betas 0.9/0.999, eps 1e-8, weight decay 0.01
  o.weight_decay = 0.1;
  o.no_decay_bias_and_1d = no_decay_rule;
  AdamW ours_opt(ours, o);

  std::vector<at::Tensor> decay, no_decay;
  for (const auto& [n, t] : ref_named) (no_decay_rule && megatron_no_decay(n, t) ? no_decay : decay).push_back(t);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(lrs[0]).weight_decay(0.1)));
  if (!no_decay.empty())
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                      torch::optim::AdamWOptions(lrs[0]).weight_decay(0.0)));
  torch::optim::AdamW torch_opt(groups, torch::optim::AdamWOptions(lrs[0]));

  for (int s = 0; s < 5; ++s) {
    set_grads(values(ours), s);
    set_grads(ref, s);
    for (auto& g : torch_opt.param_groups()) g.options().set_lr(lrs[s]);
    torch_opt.step();
    ours_opt.step(lrs[s]);
    for (const auto& [n, t] : ours) {
      EXPECT_TRUE(at::equal(t, ref_named.at(n))) << n << " after step " << s << ": max diff "
                                                  << (t - ref_named.at(n)).abs().max().item<double>();
    }
  }
  EXPECT_EQ(ours_opt.step_count(), 5);
  EXPECT_EQ(ours_opt.state().params.at("layers.0.mlp.fc1.weight").step, 4);  // parameter 3: skipped once
  EXPECT_EQ(ours_opt.state().params.at("word_embeddings.weight").step, 5);
  EXPECT_EQ(ours_opt.decays("layers.0.attn_hc.alpha_pre"), !no_decay_rule);
  EXPECT_EQ(ours_opt.decays("layers.0.norm_proj.weight"), true);
}

TEST(AdamW, MatchesTorchAdamWBitwiseWithNoDecayRule) { expect_same_as_torch(true); }
TEST(AdamW, MatchesTorchAdamWBitwiseDecayingEverything) { expect_same_as_torch(false); }

TEST(AdamW, DefaultsAreTorchDefaults) {
  AdamWOptions o;
  torch::optim::AdamWOptions t;
  EXPECT_EQ(o.beta1, std::get<0>(t.betas()));
  EXPECT_EQ(o.beta2, std::get<1>(t.betas()));
  EXPECT_EQ(o.eps, t.eps());
  EXPECT_EQ(o.weight_decay, t.weight_decay());
}

// Megatron-LM's rule: biases and one-dimensional parameters.
TEST(AdamW, NoDecayRuleIsMegatrons) {
  EXPECT_TRUE(is_no_decay("layers.0.mlp.fc1.bias", 1));
  EXPECT_TRUE(is_no_decay("layers.3.attn_norm.weight", 1));
  EXPECT_TRUE(is_no_decay("final_norm.bias", 1));
  EXPECT_TRUE(is_no_decay("layers.0.attn_hc.alpha_pre", 1));  // the old name rule decayed it
  EXPECT_TRUE(is_no_decay("layers.0.mixer.A_log", 1));
  EXPECT_FALSE(is_no_decay("layers.0.mlp.fc1.weight", 2));
  EXPECT_FALSE(is_no_decay("word_embeddings.weight", 2));
  EXPECT_FALSE(is_no_decay("layers.0.norm_proj.weight", 2));  // the old name rule exempted it
  EXPECT_FALSE(is_no_decay("layers.0.bias_gate.weight", 2));  // "bias" not at the end

  AdamWOptions o;
  AdamW opt({{"a.weight", at::zeros({1, 1})}, {"a.bias", at::zeros({1})}, {"ln_norm.weight", at::zeros({1})},
              {"hc.alpha_pre", at::zeros({3})}},
             o);
  EXPECT_TRUE(opt.decays("a.weight"));
  EXPECT_FALSE(opt.decays("a.bias"));
  EXPECT_FALSE(opt.decays("ln_norm.weight"));
  EXPECT_FALSE(opt.decays("hc.alpha_pre"));
  o.no_decay_bias_and_1d = false;
  AdamW all({{"a.bias", at::zeros({1})}}, o);
  EXPECT_TRUE(all.decays("a.bias"));
}

TEST(AdamW, WeightDecayOnlyTouchesDecayedParams) {
  // Zero grads: the Adam term is 0, so only the decay moves a parameter.
  auto w = at::ones({2, 2}, at::kDouble).requires_grad_(true);
  auto b = at::ones({2}, at::kDouble).requires_grad_(true);
  auto alpha = at::ones({2}, at::kDouble).requires_grad_(true);
  w.mutable_grad() = at::zeros({2, 2}, at::kDouble);
  b.mutable_grad() = at::zeros({2}, at::kDouble);
  alpha.mutable_grad() = at::zeros({2}, at::kDouble);
  AdamWOptions o;
  o.weight_decay = 0.5;
  AdamW opt({{"fc.weight", w}, {"fc.bias", b}, {"hc.alpha_pre", alpha}}, o);
  opt.step(0.1);
  EXPECT_DOUBLE_EQ(w[0][0].item<double>(), 1.0 - 0.1 * 0.5);
  EXPECT_DOUBLE_EQ(b[0].item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(alpha[0].item<double>(), 1.0);  // one-dimensional: not decayed
}

TEST(AdamW, StateMovesBetweenLayoutsByName) {
  // One optimizer over all params, versus two "ranks" that load its state
  // after 2 steps and continue: the same numbers.
  NamedParams full = make_params(3);
  NamedParams copy = make_params(3);
  AdamW whole(full);
  for (int s = 0; s < 2; ++s) {
    set_grads(values(full), s);
    whole.step(1e-2);
  }
  {
    at::NoGradGuard g;
    for (auto& [n, t] : copy) t.copy_(full.at(n));
  }
  NamedParams part_a, part_b;
  int i = 0;
  for (auto& [n, t] : copy) (i++ < 2 ? part_a : part_b)[n] = t;
  AdamW opt_a(part_a), opt_b(part_b);
  for (AdamW* o : {&opt_a, &opt_b}) {
    AdamWState st;
    st.step = whole.state().step;
    for (const auto& [n, t] : o->params()) st.params[n] = whole.state().params.at(n);
    o->load_state(st);
  }
  for (int s = 2; s < 5; ++s) {
    set_grads(values(full), s);
    set_grads(values(copy), s);
    whole.step(1e-2);
    opt_a.step(1e-2);
    opt_b.step(1e-2);
  }
  for (const auto& [n, t] : full) EXPECT_TRUE(at::equal(t, copy.at(n))) << n;
}

TEST(AdamW, RejectsBadOptionsAndState) {
  auto expect_msg = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no exception, expected one mentioning " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  NamedParams p{{"w", at::zeros({2, 2}, at::kDouble).requires_grad_(true)}};
  expect_msg([&] { AdamWOptions o; o.beta1 = 1.0; AdamW a(p, o); }, "train.adam.beta1");
  expect_msg([&] { AdamWOptions o; o.beta2 = -0.1; AdamW a(p, o); }, "train.adam.beta2");
  expect_msg([&] { AdamWOptions o; o.eps = 0; AdamW a(p, o); }, "train.adam.eps");
  expect_msg([&] { AdamWOptions o; o.weight_decay = -1; AdamW a(p, o); }, "train.adam.weight_decay");
  AdamW a(p);
  expect_msg([&] { a.step(-1e-3); }, "train.lr.max_lr");
  expect_msg([&] { a.step(std::nan("")); }, "train.lr.max_lr");
  AdamWState st;
  st.params["nope"] = {at::zeros({2, 2}), at::zeros({2, 2}), 1};
  expect_msg([&] { a.load_state(st); }, "nope is not a parameter");
  st.params.clear();
  st.params["w"] = {at::zeros({3}), at::zeros({3}), 1};
  expect_msg([&] { a.load_state(st); }, "[3]");
}

// Every parameter with a gradient at every step: the whole-buffer update,
// bitwise torch's, with gradients that autograd accumulates into the
// optimizer's buffer after the first step.
void expect_flat_update_as_torch(const std::function<NamedParams()>& make) {
  NamedParams ours = make();
  NamedParams ref_named = make();
  AdamWOptions o;
  o.weight_decay = 0.1;
  AdamW ours_opt(ours, o);
  std::vector<at::Tensor> decay, no_decay;
  for (const auto& [n, t] : ref_named) (megatron_no_decay(n, t) ? no_decay : decay).push_back(t);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-2).weight_decay(0.1)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(1e-2).weight_decay(0.0)));
  torch::optim::AdamW torch_opt(groups, torch::optim::AdamWOptions(1e-2));
  std::map<std::string, const void*> buffer;
  for (int s = 0; s < 4; ++s) {
    for (NamedParams* side : {&ours, &ref_named}) {
      int i = 0;
      for (auto& [n, p] : *side) {
        // A small graph per parameter: backward accumulates (p * g).sum()'s gradient g.
        (p * grad_for(p, i++, s)).sum().backward();
      }
    }
    torch_opt.step();
    ours_opt.step(1e-2);
    for (const auto& [n, t] : ours) {
      EXPECT_TRUE(at::equal(t, ref_named.at(n))) << n << " after step " << s;
      if (s == 0) buffer[n] = t.grad().data_ptr();
      EXPECT_EQ(t.grad().data_ptr(), buffer[n]) << n << ": the gradient left the optimizer's buffer at step " << s;
    }
    ours_opt.zero_grad();
    torch_opt.zero_grad();
  }
  EXPECT_EQ(ours_opt.state().params.size(), ours.size());
  for (const auto& [n, st] : ours_opt.state().params) EXPECT_EQ(st.step, 4) << n;
}

TEST(AdamW, TheFlatUpdateMatchesTorchAndKeepsAccumulatingInPlace) {
  expect_flat_update_as_torch([] { return make_params(11); });
}

// The update goes through the buffer in pieces of kPieceElements: a parameter
// larger than a piece, one that straddles two pieces, one that ends where a
// piece ends, and one that is not contiguous (a buffer of its own, where it
// would otherwise straddle two pieces).
TEST(AdamW, TheFlatUpdateInPiecesMatchesTorch) {
  constexpr std::int64_t piece = AdamW::kPieceElements;
  expect_flat_update_as_torch([] {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    NamedParams p;
    p["a.weight"] = at::randn({piece + 1000}, gen, opts);  // beyond the first piece
    p["b.bias"] = at::randn({piece - 1000 - 24}, gen, opts);  // ends 24 short of the second piece's end
    p["c.weight"] = at::randn({6, 4}, gen, opts);           // ends where the second piece ends
    p["d.weight"] = at::randn({2, piece - 10}, gen, opts);  // ends 20 short of the fourth piece's end
    p["e.weight"] = at::randn({8, 5}, gen, opts).t();       // not contiguous: in one flat buffer it would straddle
    for (auto& [n, t] : p) t.requires_grad_(true);
    return p;
  });
}

TEST(AdamW, ZeroGradKeepsGradsDefined) {
  auto w = at::ones({2}, at::kDouble).requires_grad_(true);
  w.mutable_grad() = at::ones({2}, at::kDouble);
  AdamW opt({{"w", w}});
  opt.zero_grad();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace hp::train
