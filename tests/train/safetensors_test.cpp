// The layout is checked against bytes assembled here from Hugging Face's
// specification, not against the writer under test.
#include "train/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace hp::train {
namespace {

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

// The spec's layout: u64 little-endian header size, the JSON header (padded
// with spaces to 8 bytes), the buffer.
std::string spec_file(std::string header, const std::string& buffer) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + buffer;
}

TEST(Safetensors, WritesTheSpecsLayoutByteForByte) {
  const std::string path = ::testing::TempDir() + "layout.safetensors";
  const std::string a = f32_bytes({1.5f, -2}), b = f32_bytes({3, 4, 5, 6, 7, 8});
  write_safetensors(path, {{"a", "F32", {2}, a}, {"b.weight", "F32", {2, 3}, b}}, {{"format", "pt"}});
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
      R"("b.weight":{"data_offsets":[8,32],"dtype":"F32","shape":[2,3]}})";
  EXPECT_EQ(file_text(path), spec_file(header, a + b));
  std::map<std::string, std::string> meta;
  const auto back = read_safetensors(path, &meta);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].name, "b.weight");
  EXPECT_EQ(back[1].shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(back[1].data, b);
  EXPECT_EQ(meta.at("format"), "pt");
}

TEST(Safetensors, RefusesAFileTheSpecForbidsNamingTheDefect) {
  const std::string path = ::testing::TempDir() + "bad.safetensors";
  const std::string eight = f32_bytes({1, 2});
  auto refusal = [&](const std::string& bytes) -> std::string {
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      read_safetensors(path);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  auto has = [](const std::string& message, const std::string& text) {
    return message.find(text) != std::string::npos ? ::testing::AssertionSuccess()
                                                   : ::testing::AssertionFailure() << message;
  };
  EXPECT_TRUE(has(refusal("abc"), "shorter than its 8-byte header length"));
  EXPECT_TRUE(has(refusal(std::string("\xff\0\0\0\0\0\0\0{}", 10)), "a header of 255 bytes"));
  EXPECT_TRUE(has(refusal(spec_file("[1]", "")), "the header is not a JSON object"));
  EXPECT_TRUE(has(refusal(spec_file(R"({"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", eight)), "unknown dtype F7"));
  EXPECT_TRUE(has(refusal(spec_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight)),
                  "hold 8 bytes, not its shape's"));
  EXPECT_TRUE(has(refusal(spec_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", eight)),
                  "outside the 8-byte buffer"));
  EXPECT_TRUE(has(refusal(spec_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight)),
                  "leave a hole at byte 0"));
  EXPECT_TRUE(has(refusal(spec_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight)),
                  "leave 4 bytes of the buffer unused"));
  EXPECT_TRUE(has(refusal(spec_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight)),
                  "overlap"));
}

}  // namespace
}  // namespace hp::train
