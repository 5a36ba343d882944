// Dense ids for the channels of a schedule (internal to src/schedule): a
// channel is an ordered pair of ranks (sender, receiver), and the runtime
// delivers each channel's messages in order, so the k-th send from a to b
// meets the k-th receive on b from a. Validation and the simulator keep
// their per-channel state in flat arrays indexed by these ids.
//
// Ids count from 0 in order of first use. Lookups are a table read while
// pp * pp is small (every realistic pipeline) and a hash lookup beyond, so
// a schedule with many ranks costs no pp * pp table. Thread-compatible.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace hp::schedule {

class ChannelIndex {
 public:
  explicit ChannelIndex(int pp);

  // The id of channel from -> to (both in [0, pp)), added when new.
  int id(int from, int to) {
    if (!dense_.empty()) {
      int& slot = dense_[static_cast<std::size_t>(from) * pp_ + to];
      if (slot < 0) slot = add(from, to);
      return slot;
    }
    return sparse_id(from, to);
  }
  int size() const { return static_cast<int>(from_.size()); }
  int from(int id) const { return from_[id]; }
  int to(int id) const { return to_[id]; }

 private:
  int add(int from, int to);
  int sparse_id(int from, int to);

  int pp_;
  std::vector<int> dense_;  // from * pp + to -> id, or -1; empty when pp is large
  std::unordered_map<std::uint64_t, int> sparse_;
  std::vector<int> from_, to_;
};

}  // namespace hp::schedule
