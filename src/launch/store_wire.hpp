// The wire form of the launcher-hosted store (store_server.hpp,
// store_client.hpp): one frame per request and per reply, a code byte and a
// list of byte strings, each length a 4-byte little-endian count.
//
// Contract: pure functions, no I/O, no LibTorch. decode() never reads past
// the buffer and refuses a frame larger than kMaxFrameBytes (a client that
// is not ours, or a corrupt stream), so a server cannot be made to allocate
// without bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hp::launch::store_wire {

// Requests. Keys and values are byte strings; numbers travel as decimal text.
enum Op : std::uint8_t {
  kSet = 1,         // key value -> (ok)
  kGet = 2,         // key -> (ok value) or missing
  kAdd = 3,         // key delta -> (ok new value); an absent key counts from 0
  kCompareSet = 4,  // key expected desired -> (ok value now): c10d's compareSet
  kDelete = 5,      // key -> (ok "1" or "0")
  kCheck = 6,       // keys... -> (ok "1" when all exist, else "0")
  kNumKeys = 7,     // -> (ok count)
  kWait = 8,        // timeout_ms keys... -> ok once all exist, or timeout
  kWill = 9,        // key value: set key to value (if absent) when this connection is lost
  kBye = 10,        // this connection ends on purpose: its wills are dropped
};

enum Status : std::uint8_t { kOk = 0, kTimeout = 1, kMissing = 2, kError = 3 };

struct Frame {
  std::uint8_t code = 0;
  std::vector<std::string> parts;
};

inline constexpr std::size_t kMaxFrameBytes = std::size_t(1) << 30;

std::string encode(std::uint8_t code, const std::vector<std::string>& parts);

// Decodes the frame at the front of `buf`: returns the bytes it took, or 0
// when the frame is not complete yet. Throws std::runtime_error for a frame
// over kMaxFrameBytes.
std::size_t decode(const std::string& buf, Frame& out);

}  // namespace hp::launch::store_wire
