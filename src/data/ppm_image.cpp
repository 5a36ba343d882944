#include "data/ppm_image.hpp"

#include <cctype>
#include <fstream>
#include <stdexcept>

namespace hp::data {

namespace {

// The next header field: whitespace and '#' comments skipped.
std::string field(std::istream& in) {
  std::string out;
  for (int c = in.get(); c != EOF; c = in.get()) {
    if (c == '#') {
      while (c != EOF && c != '\n') c = in.get();
    } else if (std::isspace(c)) {
      if (!out.empty()) break;  // the single whitespace after maxval ends the header
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

int number(const std::string& path, const std::string& text, const char* what) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument(path + ": the PPM header's " + what + " is '" + text + "', not a number");
  return std::stoi(text);
}

}  // namespace

std::vector<float> read_ppm(const std::string& path, int size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot open the image file");
  if (field(in) != "P6") throw std::invalid_argument(path + ": not a binary PPM image (it must start with P6)");
  const int width = number(path, field(in), "width");
  const int height = number(path, field(in), "height");
  const int maxval = number(path, field(in), "maxval");
  if (maxval < 1 || maxval > 255)
    throw std::invalid_argument(path + ": maxval " + std::to_string(maxval) + " (1..255, one byte per sample)");
  if (width != size || height != size)
    throw std::invalid_argument(path + ": the image is " + std::to_string(width) + "x" + std::to_string(height) +
                                " pixels; the model takes " + std::to_string(size) + "x" + std::to_string(size));
  std::vector<unsigned char> rgb(static_cast<std::size_t>(size) * size * 3);
  if (!in.read(reinterpret_cast<char*>(rgb.data()), static_cast<std::streamsize>(rgb.size())))
    throw std::invalid_argument(path + ": the image data ends early (" + std::to_string(in.gcount()) + " of " +
                                std::to_string(rgb.size()) + " bytes)");
  std::vector<float> out(rgb.size());
  const std::size_t pixels = static_cast<std::size_t>(size) * size;
  for (std::size_t p = 0; p < pixels; ++p)
    for (int c = 0; c < 3; ++c) out[c * pixels + p] = static_cast<float>(rgb[3 * p + c]) / static_cast<float>(maxval);
  return out;
}

}  // namespace hp::data
