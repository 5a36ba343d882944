#include "schedule/p2p_channels.hpp"

namespace hp::schedule {
namespace {
// Beyond this many ranks the table (pp * pp ints) would outweigh the lookups it saves.
constexpr int kMaxDensePp = 256;
}  // namespace

ChannelIndex::ChannelIndex(int pp) : pp_(pp) {
  if (pp <= kMaxDensePp) dense_.assign(static_cast<std::size_t>(pp) * pp, -1);
}

int ChannelIndex::add(int from, int to) {
  from_.push_back(from);
  to_.push_back(to);
  return static_cast<int>(from_.size()) - 1;
}

int ChannelIndex::sparse_id(int from, int to) {
  const std::uint64_t key = static_cast<std::uint64_t>(from) * static_cast<std::uint64_t>(pp_) + to;
  const auto [it, added] = sparse_.try_emplace(key, size());
  if (added) add(from, to);
  return it->second;
}

}  // namespace hp::schedule
