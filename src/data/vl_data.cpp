#include "data/vl_data.hpp"

#include <cmath>
#include <stdexcept>

#include "data/rng.hpp"

namespace hp::data {
namespace {

enum Word { kBos = kVLBos, kEos = kVLEos, kA, kOn, kThe, kRed, kGreen, kBlue, kYellow, kSquare, kFrame, kCross, kBar, kTop, kBottom, kLeft, kRight };

constexpr float kColours[4][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 0}};
constexpr double kNoiseStd = 0.05;

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

// Uniform in (0, 1): 53 random bits, never 0 (Box-Muller takes its log).
double uniform(SplitMix64& rng) { return (static_cast<double>(rng.next() >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace

const std::vector<std::string>& vl_vocabulary() {
  static const std::vector<std::string> words = {"<bos>", "<eos>", "a",      "on",     "the",    "red",
                                                 "green", "blue",  "yellow", "square", "frame",  "cross",
                                                 "bar",   "top",   "bottom", "left",   "right"};
  return words;
}

VLBatch make_vl_batch(int image_size, int rows, std::uint64_t seed, std::int64_t first_index, bool with_images) {
  if (image_size < 4 || image_size % 2 != 0)
    throw std::invalid_argument("VL images must have an even size >= 4, got " + std::to_string(image_size));
  if (rows < 0) throw std::invalid_argument("make_vl_batch: rows must be >= 0");
  const int s = image_size, q = s / 2;
  const std::size_t pixels = static_cast<std::size_t>(kVLChannels) * s * s;
  VLBatch b;
  b.rows = rows;
  b.image_size = s;
  b.captions.resize(static_cast<std::size_t>(rows) * kVLCaptionTokens);
  if (with_images) b.images.assign(static_cast<std::size_t>(rows) * pixels, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const std::uint64_t index = static_cast<std::uint64_t>(first_index + r);
    SplitMix64 rng(seed * 0x9e3779b97f4a7c15ULL ^ (index + 1) * 0xd1b54a32d192ed03ULL);
    const int colour = rng.next() % 4, shape = rng.next() % 4, vert = rng.next() % 2, horiz = rng.next() % 2;
    const std::int64_t words[kVLCaptionTokens] = {kBos, kA, kRed + colour, kSquare + shape, kOn, kThe,
                                                  vert ? kBottom : kTop, horiz ? kRight : kLeft, kEos};
    for (int t = 0; t < kVLCaptionTokens; ++t) b.captions[r * kVLCaptionTokens + t] = words[t];
    if (!with_images) continue;
    float* img = b.images.data() + r * pixels;
    auto at = [&](int c, int y, int x) -> float& { return img[(static_cast<std::size_t>(c) * s + y) * s + x]; };
    for (int y = 0; y < q; ++y)
      for (int x = 0; x < q; ++x)
        if (on_shape(shape, y, x, q))
          for (int c = 0; c < kVLChannels; ++c) at(c, vert * q + y, horiz * q + x) = kColours[colour][c];
    // Noise so that no two images are identical, fixed per sample (Box-Muller).
    SplitMix64 noise(rng.next());
    for (std::size_t i = 0; i < pixels; ++i) {
      const double u1 = uniform(noise), u2 = uniform(noise);
      img[i] += static_cast<float>(kNoiseStd * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  }
  return b;
}

std::string caption_text(const std::int64_t* caption, int length) {
  std::string out;
  const auto& words = vl_vocabulary();
  for (int t = 0; t < length; ++t) {
    const std::int64_t id = caption[t];
    if (id == kBos || id == kEos) continue;
    if (!out.empty()) out += ' ';
    out += id >= 0 && id < static_cast<std::int64_t>(words.size()) ? words[id] : "?";
  }
  return out;
}

}  // namespace hp::data
