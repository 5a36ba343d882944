#include "schedule/comm_cycles.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace hp::schedule {
namespace {

using Ends = std::vector<std::vector<MessageEnd>>;

constexpr int kDone = -2;  // rendezvous: both ends posted

// Runs the batches under blocking rendezvous, in list order or, backward, in
// reverse order (the run of the reversed graph). `first` (one int per
// message, all -1 on entry) ends as kDone for every message the run
// completes. A rank posts its next batch once every message of its current
// batch has both ends posted.
void rendezvous(const Ends& ends, bool backward, std::vector<int>& first) {
  const int pp = static_cast<int>(ends.size());
  std::vector<std::size_t> stop(pp, 0);  // end of the current batch, in run order
  std::vector<int> remaining(pp, 0);     // its messages still waiting for their other end
  std::vector<int> work;
  auto run = [&](int r) {
    const auto& v = ends[r];
    const std::size_t n = v.size();
    auto at = [&](std::size_t i) { return backward ? v[n - 1 - i] : v[i]; };
    while (remaining[r] == 0 && stop[r] < n) {
      const std::size_t b = stop[r];
      const int slot = at(b).slot();
      std::size_t e = b;
      while (e < n && at(e).slot() == slot) ++e;
      stop[r] = e;
      remaining[r] = static_cast<int>(e - b);
      for (std::size_t i = b; i < e; ++i) {
        const int m = at(i).msg();
        const int other = first[m];
        if (other == -1) {
          first[m] = r;
          continue;
        }
        first[m] = kDone;
        --remaining[r];
        if (--remaining[other] == 0) work.push_back(other);
      }
    }
  };
  for (int r = pp - 1; r >= 0; --r) work.push_back(r);
  while (!work.empty()) {
    const int r = work.back();
    work.pop_back();
    run(r);
  }
}

// Tarjan's algorithm on the candidate messages, with the gaps folded into
// edges: message m points to every message of the batch after each of its
// two ends. Cycles through gaps and these cycles are the same (a gap has a
// single batch before and after it), so are the cyclic components.
class Tarjan {
 public:
  // index and low: one int per message, reused as scratch (their contents are lost).
  Tarjan(const Ends& ends, const std::vector<char>& candidate, std::vector<int>& index, std::vector<int>& low)
      : ends_(ends), candidate_(candidate), index_(index), low_(low) {
    const int num_messages = static_cast<int>(candidate.size());
    offset_.assign(ends.size() + 1, 0);
    for (std::size_t r = 0; r < ends.size(); ++r) offset_[r + 1] = offset_[r] + static_cast<int>(ends[r].size());
    pos_.assign(2 * static_cast<std::size_t>(num_messages), -1);
    for (std::size_t r = 0; r < ends.size(); ++r)
      for (std::size_t i = 0; i < ends[r].size(); ++i) {
        const int m = ends[r][i].msg();
        pos_[2 * m + (pos_[2 * m] < 0 ? 0 : 1)] = offset_[r] + static_cast<int>(i);
      }
    component_.assign(num_messages, -1);
    std::fill(index_.begin(), index_.end(), -1);
    run();
  }
  std::vector<int> take_components() { return std::move(component_); }
  int num_components() const { return num_components_; }

 private:
  static constexpr int kOnStack = -2;  // component_ of a node on the stack

  // A node being explored: side 0 and 1 walk the batch after each of its ends.
  struct Frame {
    int v;
    int side = 0;
    int rank = -1;  // -1: this side's batch not located yet
    int i = 0, stop = 0;
  };

  // The next candidate successor of f.v, or -1 when there is none left.
  int next_successor(Frame& f) const {
    while (f.side < 2) {
      if (f.rank < 0) {
        const int g = pos_[2 * f.v + f.side];
        f.rank = static_cast<int>(std::upper_bound(offset_.begin(), offset_.end(), g) - offset_.begin()) - 1;
        const auto& rank = ends_[f.rank];
        const int n = static_cast<int>(rank.size());
        int b = g - offset_[f.rank];
        const int slot = rank[b].slot();
        while (b < n && rank[b].slot() == slot) ++b;
        int e = b;
        while (e < n && rank[e].slot() == rank[b].slot()) ++e;
        f.i = b;
        f.stop = e;
      }
      while (f.i < f.stop) {
        const int w = ends_[f.rank][f.i++].msg();
        if (candidate_[w]) return w;
      }
      ++f.side;
      f.rank = -1;
    }
    return -1;
  }

  void run() {
    std::vector<int> stack;
    std::vector<Frame> call;
    int counter = 0;
    auto visit = [&](int v) {
      index_[v] = low_[v] = counter++;
      stack.push_back(v);
      component_[v] = kOnStack;
      call.push_back({v});
    };
    for (int root = 0; root < static_cast<int>(candidate_.size()); ++root) {
      if (!candidate_[root] || index_[root] >= 0) continue;
      visit(root);
      while (!call.empty()) {
        Frame& f = call.back();
        if (const int w = next_successor(f); w >= 0) {
          if (index_[w] < 0) {
            visit(w);  // invalidates f
          } else if (component_[w] == kOnStack) {
            low_[f.v] = std::min(low_[f.v], index_[w]);
          }
          continue;
        }
        const int done = f.v;
        call.pop_back();
        if (!call.empty()) low_[call.back().v] = std::min(low_[call.back().v], low_[done]);
        if (low_[done] != index_[done]) continue;
        const bool trivial = stack.back() == done;
        for (int w = -1; w != done;) {
          w = stack.back();
          stack.pop_back();
          component_[w] = trivial ? -1 : num_components_;
        }
        if (!trivial) ++num_components_;
      }
    }
  }

  const Ends& ends_;
  const std::vector<char>& candidate_;
  std::vector<int>& index_;
  std::vector<int>& low_;
  std::vector<int> offset_;  // flat index of (rank r, position i) = offset_[r] + i
  std::vector<int> pos_;     // per message, the flat indices of its two ends
  std::vector<int> component_;
  int num_components_ = 0;
};

}  // namespace

CommCycles::CommCycles(const Ends& ends, int num_messages) {
  std::vector<int> forward(num_messages, -1);
  rendezvous(ends, false, forward);
  if (std::all_of(forward.begin(), forward.end(), [](int f) { return f == kDone; })) return;
  std::vector<int> backward(num_messages, -1);
  rendezvous(ends, true, backward);
  std::vector<char> candidate(num_messages);
  for (int m = 0; m < num_messages; ++m) candidate[m] = forward[m] != kDone && backward[m] != kDone;
  Tarjan tarjan(ends, candidate, forward, backward);
  num_components_ = tarjan.num_components();
  component_ = tarjan.take_components();
}

}  // namespace hp::schedule
