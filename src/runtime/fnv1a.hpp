// FNV-1a, 64 bits: a hash of names that every rank and every run computes
// alike, where the seeds of initial values come from (model/param_init) and
// where ranks check that they agree (tied parameters, MPipe's coalesced
// broadcast). Changing it changes every model's initial values.
#pragma once

#include <cstdint>
#include <string_view>

namespace hp::runtime {

inline std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace hp::runtime
