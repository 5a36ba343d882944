// The VL model's parts: the vision tower and its split into a transposed
// prefix and the rest, the frozen tower, the synthetic captioned images.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <set>

#include "model/test_util.hpp"
#include "model/vision.hpp"
#include "model/vl_tensors.hpp"

namespace hp::model {
namespace {

TransformerConfig text() {
  TransformerConfig c;
  c.num_layers = 2;
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.vocab_size = 17;
  c.max_seq_len = 24;
  c.dtype = DType::Float64;
  c.seed = 3;
  return c;
}

VisionConfig vision(int layers = 3) {
  VisionConfig v;
  v.num_layers = layers;
  v.image_size = 8;
  v.patch_size = 4;
  v.hidden_size = 8;
  v.num_attention_heads = 2;
  return v;
}

TEST(VisionTower, ASplitTowerComputesWhatTheWholeTowerComputes) {
  const auto images = hp::testing::make_vl_tensors(vision().image_size, 3, 1, 0, at::kDouble).images;
  VisionTower whole(vision(), text(), 0, 3);
  const at::Tensor want = whole.forward(images);
  EXPECT_EQ(want.sizes().vec(), (std::vector<int64_t>{3, 4, 16}));
  for (int t = 1; t < 3; ++t) {
    VisionTower head(vision(), text(), 0, t), tail(vision(), text(), t, 3);
    EXPECT_EQ(head.output_spec(3).shape, (std::vector<int64_t>{3, 4, 8}));
    EXPECT_TRUE(at::allclose(tail.forward(head.forward(images)), want, 1e-12, 1e-12)) << "T = " << t;
  }
}

TEST(VisionTower, PartsCarryGlobalNamesAndThePatchEmbeddingAndProjectorSitAtTheEnds) {
  auto names = [](const VisionTower& t) {
    std::set<std::string> out;
    for (const auto& [n, p] : t.global_parameters()) out.insert(n);
    return out;
  };
  const auto head = names(VisionTower(vision(), text(), 0, 1));
  EXPECT_TRUE(head.count("vision.patch_embed.weight"));
  EXPECT_TRUE(head.count("vision.position.weight"));
  EXPECT_TRUE(head.count("vision.blocks.0.attention.qkv.weight"));
  EXPECT_FALSE(head.count("vision.projector.fc.weight"));
  const auto tail = names(VisionTower(vision(), text(), 1, 3));
  EXPECT_FALSE(tail.count("vision.patch_embed.weight"));
  EXPECT_TRUE(tail.count("vision.blocks.2.mlp.fc2.bias"));
  EXPECT_TRUE(tail.count("vision.projector.norm.weight"));
  EXPECT_TRUE(tail.count("vision.projector.fc.weight"));
}

TEST(VisionTower, AFrozenTowerRecordsNoGradients) {
  VisionConfig v = vision();
  v.frozen = true;
  VisionTower tower(v, text(), 0, 3);
  for (const auto& [n, p] : tower.global_parameters()) EXPECT_FALSE(p.requires_grad()) << n;
  const at::Tensor out = tower.forward(hp::testing::make_vl_tensors(v.image_size, 2, 1, 0, at::kDouble).images);
  EXPECT_FALSE(out.requires_grad());
}

TEST(VisionTower, BadInputIsRejected) {
  using testing::expect_invalid;
  expect_invalid([] { VisionTower(vision(), text(), 2, 2); }, {"non-empty range", "vision.num_layers 3"});
  expect_invalid([] { VisionTower(vision(), text(), 0, 4); }, {"vision.num_layers 3"});
  VisionConfig v = vision();
  v.patch_size = 3;
  expect_invalid([&] { v.validate(); }, {"vision.patch_size 3 must divide vision.image_size 8"});
  VisionTower tower(vision(), text(), 0, 3);
  expect_invalid([&] { tower.forward(at::zeros({2, 3, 4, 4}, at::kDouble)); }, {"expect pixels", "[rows, 3, 8, 8]"});
  expect_invalid([] { VisionPreprocess(vision(), text(), 0); }, {"1..vision.num_layers 3"});
}

TEST(VLData, SamplesAreFixedBySeedAndIndexAndCaptionsDescribeTheImage) {
  const VisionConfig v = vision();
  using hp::testing::make_vl_tensors;
  const auto a = make_vl_tensors(v.image_size, 4, 9, 10, at::kFloat);
  const auto b = make_vl_tensors(v.image_size, 2, 9, 12, at::kFloat);
  EXPECT_TRUE(a.images.slice(0, 2, 4).equal(b.images));
  EXPECT_TRUE(a.captions.slice(0, 2, 4).equal(b.captions));
  EXPECT_FALSE(make_vl_tensors(v.image_size, 4, 10, 10, at::kFloat).captions.equal(a.captions));
  // Captions alone (a rank that reads no image) are the same captions.
  const auto captions_only = data::make_vl_batch(v.image_size, 4, 9, 10, /*with_images=*/false);
  EXPECT_TRUE(captions_only.images.empty());
  EXPECT_TRUE(at::tensor(captions_only.captions, at::kLong).view({4, data::kVLCaptionTokens}).equal(a.captions));
  const auto big = make_vl_tensors(v.image_size, 64, 1, 0, at::kFloat);
  std::set<std::string> captions;
  for (int r = 0; r < 64; ++r) {
    const at::Tensor row = big.captions[r].contiguous();
    const std::string text = data::caption_text(row.data_ptr<std::int64_t>(), static_cast<int>(row.numel()));
    captions.insert(text);
    // The named colour is the brightest channel of the named quadrant.
    const at::Tensor img = big.images[r];
    const int q = v.image_size / 2;
    const int y0 = text.find("bottom") != std::string::npos ? q : 0;
    const int x0 = text.find("right") != std::string::npos ? q : 0;
    const at::Tensor quad = img.slice(1, y0, y0 + q).slice(2, x0, x0 + q).sum({1, 2});
    const at::Tensor other = img.sum({1, 2}) - quad;
    EXPECT_GT(quad.sum().item<float>(), other.sum().item<float>() + 1.0f) << text;
    const float red = quad[0].item<float>(), green = quad[1].item<float>(), blue = quad[2].item<float>();
    if (text.find("red") != std::string::npos) {
      EXPECT_GT(red, green + 1) << text;
    }
    if (text.find("green") != std::string::npos) {
      EXPECT_GT(green, red + 1) << text;
    }
    if (text.find("blue") != std::string::npos) {
      EXPECT_GT(blue, red + 1) << text;
    }
    if (text.find("yellow") != std::string::npos) {
      EXPECT_GT(green, blue + 1) << text;
    }
  }
  EXPECT_GT(captions.size(), 20u);
  EXPECT_EQ(big.captions.size(1), data::kVLCaptionTokens);
  EXPECT_LT(big.captions.max().item<int64_t>(), static_cast<int64_t>(data::vl_vocabulary().size()));
}

}  // namespace
}  // namespace hp::model
