// read_ppm: a synthetic VL image written as a P6 file reads back as the same
// pixels (channel-major), comments and maxval included; every malformed file
// is refused with its path and what was wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include "data/ppm_image.hpp"
#include "data/vl_data.hpp"

namespace hp::data {
namespace {

std::string ppm_temp_path(const char* name) { return ::testing::TempDir() + name; }

// Writes [3, S, S] pixels as a P6 file of `maxval`, pixel-interleaved, clamped
// to [0, 1] (the synthetic images' noise goes a little outside).
void write_ppm(const std::string& path, const std::vector<float>& pixels, int size, int maxval,
               const std::string& header_comment = "") {
  std::ofstream out(path, std::ios::binary);
  out << "P6\n" << header_comment << size << " " << size << "\n" << maxval << "\n";
  const std::size_t n = static_cast<std::size_t>(size) * size;
  for (std::size_t p = 0; p < n; ++p)
    for (int c = 0; c < kVLChannels; ++c)
      out.put(static_cast<char>(std::lround(std::clamp(pixels[c * n + p], 0.0f, 1.0f) * maxval)));
}

TEST(PpmImage, ASyntheticImageReadsBackAsItsPixels) {
  const int size = 8;
  const VLBatch b = make_vl_batch(size, 1, 77, 3);
  const std::string path = ppm_temp_path("hp_synthetic.ppm");
  write_ppm(path, b.images, size, 255, "# drawn by the test\n");
  const std::vector<float> read = read_ppm(path, size);
  ASSERT_EQ(read.size(), b.images.size());
  for (std::size_t i = 0; i < read.size(); ++i) EXPECT_NEAR(read[i], std::clamp(b.images[i], 0.0f, 1.0f), 0.5 / 255) << i;
  // A smaller maxval scales to the same [0, 1] range.
  write_ppm(path, b.images, size, 15);
  const std::vector<float> coarse = read_ppm(path, size);
  for (std::size_t i = 0; i < coarse.size(); ++i) EXPECT_NEAR(coarse[i], std::clamp(b.images[i], 0.0f, 1.0f), 0.5 / 15) << i;
}

TEST(PpmImage, AMalformedFileIsRefusedWithItsPathAndTheFault) {
  const std::string path = ppm_temp_path("hp_bad.ppm");
  auto refusal = [&](const std::string& contents, int size) -> std::string {
    std::ofstream(path, std::ios::binary) << contents;
    try {
      read_ppm(path, size);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string pixels(2 * 2 * 3, '\x7f');
  EXPECT_EQ(refusal("P6 2 2 255\n" + pixels, 2), "accepted");
  EXPECT_EQ(refusal("P3 2 2 255\n1 2 3", 2), path + ": not a binary PPM image (it must start with P6)");
  EXPECT_EQ(refusal("P6 2 2 255\n" + pixels, 4), path + ": the image is 2x2 pixels; the model takes 4x4");
  EXPECT_EQ(refusal("P6 2 2 1000\n" + pixels, 2), path + ": maxval 1000 (1..255, one byte per sample)");
  EXPECT_EQ(refusal("P6 2 x 255\n" + pixels, 2), path + ": the PPM header's height is 'x', not a number");
  EXPECT_EQ(refusal("P6 2 2 255\n" + pixels.substr(5), 2), path + ": the image data ends early (7 of 12 bytes)");
  EXPECT_EQ(refusal("", 2), path + ": not a binary PPM image (it must start with P6)");
  try {
    read_ppm(ppm_temp_path("hp_no_such.ppm"), 2);
    ADD_FAILURE() << "a missing file was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), ppm_temp_path("hp_no_such.ppm") + ": cannot open the image file");
  }
}

}  // namespace
}  // namespace hp::data
