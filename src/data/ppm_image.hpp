// A binary PPM (P6) image file read as the VL model's pixels: channel-major
// [3, S, S] floats in [0, 1], as data/vl_data.hpp makes them. Any image
// editor writes PPM, and it needs no library.
#pragma once

#include <string>
#include <vector>

namespace hp::data {

// Throws std::invalid_argument "PATH: ..." when the file cannot be read, is
// not a P6 PPM (maxval 1..255), or is not `size` x `size` pixels.
std::vector<float> read_ppm(const std::string& path, int size);

}  // namespace hp::data
