// Decoding the Hybrid model with its cache (attention keys and values, Mamba
// convolution inputs and scan state) against its own full forward: every
// position's logits agree (float64), through one chunk or two, with and
// without mHC and MTP; decoding past the positions is refused.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/hybrid.hpp"
#include "model/kv_cache.hpp"

namespace hp::infer {
namespace {

model::HybridConfig config(const std::string& pattern, bool mhc) {
  model::HybridConfig c;
  c.pattern = pattern;
  c.base.hidden_size = 8;
  c.base.num_attention_heads = 2;
  c.base.vocab_size = 16;
  c.base.max_seq_len = 9;
  c.base.dtype = model::DType::Float64;
  c.base.init_std = 0.3;  // far from uniform attention, so a wrong offset shows
  c.base.seed = 5;
  c.base.enable_mhc_connections = mhc;
  c.base.mhc_num_residual_streams = 2;
  return c;
}

double hybrid_rel_error(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / (b.abs().max() + 1e-300)).item<double>();
}

struct Case {
  std::string pattern;
  bool mhc;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.pattern << (c.mhc ? " with mHC" : ""); }

class HybridDecoding : public ::testing::TestWithParam<Case> {};

TEST_P(HybridDecoding, EveryPositionMatchesTheFullForward) {
  at::manual_seed(104);  // a failure reproduces
  const auto c = config(GetParam().pattern, GetParam().mhc);
  at::NoGradGuard no_grad;
  const auto whole = model::build_reference_hybrid(c);
  const int layers = static_cast<int>(model::HybridPattern::parse(c.pattern).layers.size());
  model::HybridChunk first(c, 0, 2, true, false), second(c, 2, layers, false, true);
  const at::Tensor tokens = at::randint(16, {2, 9}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor full = whole->forward(tokens, at::randint(16, {2, 9}, at::kLong));  // MTP's target: unused by logits
  // A prefill of 3 positions, one at a time past the convolution's window, then 2.
  const std::vector<std::pair<int, int>> runs = {{0, 3}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 2}};
  model::KVCache one, a, b;
  std::vector<at::Tensor> whole_pieces, split_pieces;
  for (const auto& [start, length] : runs) {
    const auto t = tokens.narrow(1, start, length);
    whole_pieces.push_back(whole->decode(t, one));
    split_pieces.push_back(second.decode(first.decode(t, a), b));
  }
  EXPECT_EQ(one.positions, 9);
  EXPECT_EQ(b.positions, 9);
  EXPECT_LT(hybrid_rel_error(at::cat(whole_pieces, 1), full), 1e-12);
  EXPECT_LT(hybrid_rel_error(at::cat(split_pieces, 1), full), 1e-12);
  try {
    whole->decode(tokens.narrow(1, 0, 1), one);
    ADD_FAILURE() << "decoding past max_seq_len was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.max_seq_len 9 positions; 9 cached + 1 new do not fit"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Patterns, HybridDecoding,
                         ::testing::Values(Case{"M*-EM", false}, Case{"M*-EM", true}, Case{"MM*-/-*", false}),
                         [](const auto& info) {
                           return std::string(info.param.mhc ? "Mhc" : "Plain") +
                                  (info.param.pattern.find('/') != std::string::npos ? "Mtp" : "");
                         });

}  // namespace
}  // namespace hp::infer
