// The VL model's embedded dataset: synthetic captioned images, generated on
// the fly and deterministic in (seed, sample index), so a rank can generate
// exactly the samples it reads (spec D4) and training needs no files.
//
// Each image is S x S RGB, black with a little noise, and one coloured shape
// in one quadrant; the caption names what is drawn:
//   "<bos> a red cross on the top left <eos>"
// colour in {red, green, blue, yellow}, shape in {square, frame, cross, bar},
// place in {top, bottom} x {left, right}: 64 captions, each fixed by the image.
// Token ids are the word's index in vl_vocabulary(). Captions have
// kVLCaptionTokens tokens (inputs and labels are the usual shift by one).
// Free of LibTorch: plain arrays, which the model layer turns into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hp::data {

inline constexpr int kVLCaptionTokens = 9;  // <bos> a COLOUR SHAPE on the V H <eos>
inline constexpr int kVLChannels = 3;
// The ids that open and close every caption (a caption model's prompt and stop).
inline constexpr std::int64_t kVLBos = 0, kVLEos = 1;

// The words, id = position; its size is the least vocabulary a VL model needs.
const std::vector<std::string>& vl_vocabulary();

struct VLBatch {
  int rows = 0;
  int image_size = 0;
  std::vector<std::int64_t> captions;  // [rows, kVLCaptionTokens]
  std::vector<float> images;           // [rows, 3, S, S]; empty when not asked for
};

// Samples first_index .. first_index + rows - 1 of the stream fixed by seed;
// the images only when `with_images` (a caption costs nothing, an image S^2).
// Throws std::invalid_argument unless image_size is even and >= 4.
VLBatch make_vl_batch(int image_size, int rows, std::uint64_t seed, std::int64_t first_index,
                      bool with_images = true);

// "a red cross on the top left" for one caption's token ids (for logs and tests).
std::string caption_text(const std::int64_t* caption, int length);

}  // namespace hp::data
