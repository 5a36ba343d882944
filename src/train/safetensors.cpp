#include "train/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "train/durable_file.hpp"

namespace hp::train {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw std::invalid_argument(path + ": not a valid safetensors file (" + what + ")");
}

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

}  // namespace

int safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, int> kSizes = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                                    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  const auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (safetensors_dtype_size(t.dtype) == 0) throw std::invalid_argument("safetensors: unknown dtype " + t.dtype);
    if (static_cast<std::int64_t>(t.data.size()) != elements(t.shape) * safetensors_dtype_size(t.dtype))
      throw std::invalid_argument("safetensors: " + t.name + " holds " + std::to_string(t.data.size()) +
                                  " bytes, not its shape's");
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the buffer starts 8-byte aligned
  std::string file(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  file += text;
  file.reserve(file.size() + offset);
  for (const auto& t : tensors) file += t.data;
  write_text_atomic(path, file);
}

std::vector<SafeTensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata,
                                         bool with_data) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char length[8] = {};
  if (size < 8 || !in.read(reinterpret_cast<char*>(length), 8)) bad(path, "shorter than its 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | length[i];
  if (n > size - 8) bad(path, "a header of " + std::to_string(n) + " bytes in a file of " + std::to_string(size));
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) bad(path, "the header is not a JSON object");
  const std::uint64_t buffer = size - 8 - n;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  std::vector<SafeTensor> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) bad(path, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) bad(path, "__metadata__ value " + m.key() + " is not a string");
        if (metadata) (*metadata)[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const auto& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      bad(path, it.key() + " lacks dtype, shape or data_offsets");
    SafeTensor t;
    t.name = it.key();
    t.dtype = e["dtype"].get<std::string>();
    const int size = safetensors_dtype_size(t.dtype);
    if (size == 0) bad(path, t.name + " has the unknown dtype " + t.dtype);
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned()) bad(path, t.name + " has a shape entry that is not a count");
      t.shape.push_back(d.get<std::int64_t>());
    }
    const auto begin = e["data_offsets"][0].get<std::uint64_t>(), end = e["data_offsets"][1].get<std::uint64_t>();
    if (begin > end || end > buffer) bad(path, t.name + "'s data_offsets lie outside the " + std::to_string(buffer) + "-byte buffer");
    if (end - begin != static_cast<std::uint64_t>(elements(t.shape) * size))
      bad(path, t.name + "'s data_offsets hold " + std::to_string(end - begin) + " bytes, not its shape's");
    if (with_data) {
      t.data.resize(end - begin);
      in.seekg(static_cast<std::streamoff>(8 + n + begin));
      if (!in.read(t.data.data(), static_cast<std::streamsize>(end - begin)))
        throw std::runtime_error("reading " + path + " failed");
    }
    spans.emplace_back(begin, end);
    out.push_back(std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  std::uint64_t at = 0;
  for (const auto& [begin, end] : spans) {
    if (begin != at) bad(path, "the tensors overlap or leave a hole at byte " + std::to_string(at) + " of the buffer");
    at = end;
  }
  if (at != buffer) bad(path, "the tensors leave " + std::to_string(buffer - at) + " bytes of the buffer unused");
  return out;
}

}  // namespace hp::train
