// The VL model's embedded dataset: synthetic captioned images, generated on
// the fly and deterministic in (seed, sample index), so every rank that reads
// a batch reads the same one (spec D4) and training needs no files.
//
// Each image is S x S RGB, black with a little noise, and one coloured shape
// in one quadrant; the caption names what is drawn:
//   "<bos> a red cross on the top left <eos>"
// colour in {red, green, blue, yellow}, shape in {square, frame, cross, bar},
// place in {top, bottom} x {left, right}: 64 captions, each fixed by the image.
// Token ids are the word's index in vl_vocabulary(). Captions have
// kVLCaptionTokens tokens (inputs and labels are the usual shift by one).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/vision_config.hpp"

namespace hp::model {

inline constexpr int kVLCaptionTokens = 9;  // <bos> a COLOUR SHAPE on the V H <eos>

// The words, id = position; its size is the least --vocab a VL model needs.
const std::vector<std::string>& vl_vocabulary();

struct VLBatch {
  at::Tensor images;    // [rows, 3, S, S] in dtype
  at::Tensor captions;  // int64 [rows, kVLCaptionTokens]
};

// Samples first_index .. first_index + rows - 1 of the stream fixed by seed.
VLBatch make_vl_batch(const VisionConfig& vision, int rows, std::uint64_t seed, std::int64_t first_index,
                      c10::ScalarType dtype);

// "a red cross on the top left" for a caption row (for logs and tests).
std::string caption_text(const at::Tensor& caption);

}  // namespace hp::model
