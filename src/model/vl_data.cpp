#include "model/vl_data.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "data/rng.hpp"

namespace hp::model {
namespace {

enum Word { kBos, kEos, kA, kOn, kThe, kRed, kGreen, kBlue, kYellow, kSquare, kFrame, kCross, kBar, kTop, kBottom, kLeft, kRight };

constexpr float kColours[4][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}};

// Whether pixel (y, x) of a q x q quadrant belongs to the shape.
bool on_shape(int shape, int y, int x, int q) {
  const int lo = 1, hi = q - 2, mid = q / 2;
  const bool inside = y >= lo && y <= hi && x >= lo && x <= hi;
  switch (shape) {
    case 0: return inside;                                                  // square
    case 1: return inside && (y == lo || y == hi || x == lo || x == hi);    // frame
    case 2: return inside && (y == mid || x == mid);                        // cross
    default: return inside && (y == mid || y == mid - 1) && q >= 4;        // bar
  }
}

}  // namespace

const std::vector<std::string>& vl_vocabulary() {
  static const std::vector<std::string> words = {"<bos>", "<eos>", "a",      "on",     "the",    "red",
                                                 "green", "blue",  "yellow", "square", "frame",  "cross",
                                                 "bar",   "top",   "bottom", "left",   "right"};
  return words;
}

VLBatch make_vl_batch(const VisionConfig& vision, int rows, std::uint64_t seed, std::int64_t first_index,
                      c10::ScalarType dtype) {
  vision.validate();
  const int s = vision.image_size, q = s / 2;
  at::Tensor images = at::zeros({rows, 3, s, s}, at::kFloat);
  at::Tensor captions = at::empty({rows, kVLCaptionTokens}, at::kLong);
  auto img = images.accessor<float, 4>();
  auto cap = captions.accessor<int64_t, 2>();
  std::vector<std::uint64_t> noise_seeds;
  for (int r = 0; r < rows; ++r) {
    const std::uint64_t index = static_cast<std::uint64_t>(first_index + r);
    data::SplitMix64 rng(seed * 0x9e3779b97f4a7c15ULL ^ (index + 1) * 0xd1b54a32d192ed03ULL);
    const int colour = rng.next() % 4, shape = rng.next() % 4, vert = rng.next() % 2, horiz = rng.next() % 2;
    for (int y = 0; y < q; ++y)
      for (int x = 0; x < q; ++x)
        if (on_shape(shape, y, x, q))
          for (int c = 0; c < 3; ++c) img[r][c][vert * q + y][horiz * q + x] = kColours[colour][c];
    const int64_t words[kVLCaptionTokens] = {kBos, kA, kRed + colour, kSquare + shape, kOn, kThe,
                                             vert ? kBottom : kTop, horiz ? kRight : kLeft, kEos};
    for (int t = 0; t < kVLCaptionTokens; ++t) cap[r][t] = words[t];
    noise_seeds.push_back(rng.next());
  }
  // Noise so that no two images are identical, fixed per sample.
  for (int r = 0; r < rows; ++r) {
    auto gen = at::detail::createCPUGenerator(noise_seeds[r]);
    at::Tensor noise = at::empty({3, s, s}, at::kFloat);
    noise.normal_(0.0, 0.05, gen);
    images[r].add_(noise);
  }
  return {images.to(dtype), captions};
}

std::string caption_text(const at::Tensor& caption) {
  std::string out;
  const auto& words = vl_vocabulary();
  for (int64_t t = 0; t < caption.size(0); ++t) {
    const int64_t id = caption[t].item<int64_t>();
    if (id == kBos || id == kEos) continue;
    if (!out.empty()) out += ' ';
    out += id >= 0 && id < static_cast<int64_t>(words.size()) ? words[id] : "?";
  }
  return out;
}

}  // namespace hp::model
