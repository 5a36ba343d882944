#include "launch/store_wire.hpp"

#include <stdexcept>

namespace hp::launch::store_wire {
namespace {

void put_u32(std::string& out, std::size_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::size_t get_u32(const std::string& buf, std::size_t at) {
  std::size_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::size_t(static_cast<unsigned char>(buf[at + i])) << (8 * i);
  return v;
}

}  // namespace

std::string encode(std::uint8_t code, const std::vector<std::string>& parts) {
  std::string out;
  out.push_back(static_cast<char>(code));
  put_u32(out, parts.size());
  for (const auto& p : parts) {
    put_u32(out, p.size());
    out += p;
  }
  return out;
}

std::size_t decode(const std::string& buf, Frame& out) {
  if (buf.size() < 5) return 0;
  const std::size_t count = get_u32(buf, 1);
  std::size_t at = 5;
  // Each part costs at least its 4-byte length, which bounds the count too.
  if (count * 4 > kMaxFrameBytes) throw std::runtime_error("store frame of " + std::to_string(count) + " parts");
  for (std::size_t i = 0; i < count; ++i) {
    if (buf.size() < at + 4) return 0;
    const std::size_t len = get_u32(buf, at);
    if (at + 4 + len > kMaxFrameBytes) throw std::runtime_error("store frame over " + std::to_string(kMaxFrameBytes) + " bytes");
    at += 4 + len;
    if (buf.size() < at) return 0;
  }
  out.code = static_cast<std::uint8_t>(buf[0]);
  out.parts.clear();
  out.parts.reserve(count);
  std::size_t p = 5;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t len = get_u32(buf, p);
    out.parts.push_back(buf.substr(p + 4, len));
    p += 4 + len;
  }
  return at;
}

}  // namespace hp::launch::store_wire
