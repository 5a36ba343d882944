// The vision side of the VL model: a ViT-style tower over image patches and
// the projector into the text model's hidden size.
//
// Parameter names (global, under "vision."):
//   vision.patch_embed.{weight,bias}   patches [C*p*p] -> vision hidden
//   vision.position.weight             one learned position per patch
//   vision.blocks.<i>.{attn_norm,mlp_norm}.{weight,bias}
//   vision.blocks.<i>.attention.{qkv,proj}.{weight,bias}
//   vision.blocks.<i>.mlp.{fc1,fc2}.{weight,bias}
//   vision.projector.norm.{weight,bias}, vision.projector.fc.{weight,bias}
// Initial values come from initial_parameter_value (gpt.hpp) with the text
// config's seed, so they depend only on the name, never on the layout.
//
// A VisionTower holds blocks [begin, end) of the V blocks: the patch embedding
// goes with block 0 (begin == 0 takes pixels), the projector with the last
// block (end == V returns [rows, patches, text hidden]). MPipe Transpose with
// T transposed blocks splits the tower into [0, T) (the preprocess) and
// [T, V) (on stage 0, before the text layers).
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <vector>

#include "model/preprocess.hpp"
#include "model/vision_config.hpp"
#include "model/transformer_config.hpp"

namespace hp::model {

class VisionBlockImpl;
class Linear;
class LayerNorm;
class Embedding;

class VisionTower : public torch::nn::Module {
 public:
  // text: the text model's config (hidden size of the projector output,
  // dtype, seed, init, LayerNorm eps). Throws std::invalid_argument unless
  // 0 <= begin <= end <= V and begin < end.
  VisionTower(const VisionConfig& vision, const TransformerConfig& text, int begin, int end);

  // begin == 0: pixels [rows, 3, S, S] (text dtype); else features [rows, P, vision hidden].
  // Returns [rows, P, vision hidden], or [rows, P, text hidden] when end == V.
  torch::Tensor forward(const torch::Tensor& x);

  int begin() const { return begin_; }
  int end() const { return end_; }
  TensorSpec input_spec(std::int64_t rows) const;
  TensorSpec output_spec(std::int64_t rows) const;
  std::vector<std::pair<std::string, at::Tensor>> global_parameters() const;

 private:
  VisionConfig vision_;
  TransformerConfig text_;
  int begin_, end_;
  std::shared_ptr<Linear> patch_embed_;
  std::shared_ptr<Embedding> position_;
  std::shared_ptr<LayerNorm> projector_norm_;
  std::shared_ptr<Linear> projector_fc_;
  std::vector<std::shared_ptr<VisionBlockImpl>> blocks_;
};

// The VL preprocess: tower blocks [0, T) (patch embedding included; the
// projector too when T == V). pixels -> features.
class VisionPreprocess : public Preprocess {
 public:
  VisionPreprocess(const VisionConfig& vision, const TransformerConfig& text, int transpose_blocks);
  at::Tensor forward(const at::Tensor& pixels) override;
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const override;
  TensorSpec input_spec(std::int64_t rows, std::int64_t seq) const override;
  TensorSpec output_spec(std::int64_t rows, std::int64_t seq) const override;
  const std::shared_ptr<VisionTower>& tower() const { return tower_; }

 private:
  std::shared_ptr<VisionTower> tower_;
};

}  // namespace hp::model
