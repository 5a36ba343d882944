// VisionConfig: the shape of the VL model's vision tower (model/vision.hpp).
// Plain data, free of LibTorch, like TransformerConfig; field names follow the
// command-line flags.
#pragma once

namespace hp::model {

struct VisionConfig {
  int num_layers = 2;           // --vision-layers: tower blocks (V)
  int image_size = 16;          // --image-size: pixels per side (square RGB images)
  int patch_size = 4;           // --patch-size: must divide image_size
  int hidden_size = 32;         // --vision-hidden
  int num_attention_heads = 2;  // --vision-heads: must divide vision-hidden
  int ffn_hidden_size = 0;      // 0 means 4 * hidden_size
  bool frozen = false;          // --freeze-vision: no parameter of the tower trains

  static constexpr int kChannels = 3;
  int num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
  // Throws std::invalid_argument naming the option (vision.<field>) and what is allowed.
  void validate() const;
};

}  // namespace hp::model
