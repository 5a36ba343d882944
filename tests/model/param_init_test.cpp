// Initial values by role: every mHC parameter of every model starts as
// Megatron's _init_weights and hc_head_* say (xavier-uniform projections,
// gates at the gating factor, zero biases and bases, unit scales), whatever
// name its module is registered under; the generic draw (normal(0,
// init_std)) would show as values far inside the xavier bound.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "model/gpt.hpp"
#include "model/hybrid.hpp"

namespace hp::model {
namespace {

constexpr double kGating = 0.37;

TransformerConfig init_config() {
  TransformerConfig c;
  c.num_layers = 2;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.vocab_size = 16;
  c.max_seq_len = 8;
  c.dtype = DType::Float64;
  c.seed = 11;
  c.init_std = 1e-4;  // a generic draw is tiny beside any xavier bound here
  c.enable_mhc_connections = true;
  c.mhc_num_residual_streams = 3;
  c.mhc_init_gating_factor = kGating;
  return c;
}

bool contains(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// Checks every mHC parameter of `params` by its role; returns how many it checked.
int expect_mhc_roles(const torch::OrderedDict<std::string, at::Tensor>& params) {
  int checked = 0;
  for (const auto& item : params) {
    const std::string& name = item.key();
    const at::Tensor& p = item.value();
    const bool hc = contains(name, "hc.") || contains(name, "_hc."), head = contains(name, "final_contraction.");
    if (!hc && !head) continue;
    ++checked;
    auto xavier = [&] {
      const double bound = std::sqrt(6.0 / static_cast<double>(p.size(0) + p.size(1)));
      const double top = p.abs().max().item<double>(), sd = p.std().item<double>();
      EXPECT_LE(top, bound) << name;
      EXPECT_GT(top, 0.5 * bound) << name << ": not xavier-uniform (the generic draw?)";
      EXPECT_NEAR(sd, bound / std::sqrt(3.0), 0.25 * bound / std::sqrt(3.0)) << name;
    };
    if (contains(name, "alpha_")) {
      EXPECT_TRUE(p.eq(kGating).all().item<bool>()) << name << " = " << p;
    } else if (contains(name, "mapping_proj.weight")) {
      xavier();
    } else if (hc && contains(name, ".bias")) {
      EXPECT_TRUE(p.eq(0).all().item<bool>()) << name;
    } else if (contains(name, "final_contraction.weight")) {
      EXPECT_EQ(p.size(1), p.size(0) * 8) << name << ": [n, nC]";
      xavier();
    } else if (contains(name, "final_contraction.scale")) {
      EXPECT_TRUE(p.eq(1).all().item<bool>()) << name;
    } else if (contains(name, "final_contraction.base")) {
      EXPECT_TRUE(p.eq(0).all().item<bool>()) << name;
    } else {
      ADD_FAILURE() << name << ": an mHC parameter this test does not know";
    }
  }
  return checked;
}

TEST(ParamInit, EveryMhcParameterOfTheGptStartsByItsRole) {
  TransformerConfig c = init_config();
  c.mtp_num_layers = 1;
  const auto gpt = build_reference_gpt(c);
  EXPECT_EQ(expect_mhc_roles(gpt->named_parameters()), (2 + 1) * 2 * 5);  // 3 blocks x 2 HCs x 5 parameters
}

TEST(ParamInit, EveryMhcParameterOfTheHybridModelStartsByItsRole) {
  HybridConfig h;
  h.base = init_config();
  h.pattern = "M*E/-*";
  const auto hybrid = build_reference_hybrid(h);
  // 5 layers x 5 HC parameters, and two contractions (the decoder's, MTP depth 1's) of 3.
  EXPECT_EQ(expect_mhc_roles(hybrid->named_parameters()), 5 * 5 + 2 * 3);
}

// The values that were right before the rules moved into the modules stay
// bit for bit: the GPT's projection is still the double-precision uniform of
// the generator seeded with seed ^ fnv1a64(its global name).
TEST(ParamInit, TheGptsProjectionIsTheSameDrawAsBefore) {
  const TransformerConfig c = init_config();
  const auto gpt = build_reference_gpt(c);
  const std::string name = "layers.1.mlp_hc.mapping_proj.weight";
  const at::Tensor p = gpt->named_parameters()[name];
  auto gen = at::detail::createCPUGenerator(c.seed ^ fnv1a64(name));
  const double bound = std::sqrt(6.0 / static_cast<double>(p.size(0) + p.size(1)));
  const at::Tensor want = at::empty(p.sizes(), at::kDouble).uniform_(-bound, bound, gen);
  EXPECT_TRUE(p.equal(want));
}

}  // namespace
}  // namespace hp::model
