// CommCycles (the deadlock-repair cycle finder of insert_body_comms) against
// a naive reference: the explicit precedence graph with its gap nodes and
// reachability by depth-first search from every node.
#include "schedule/comm_cycles.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace hp::schedule {
namespace {

using Ends = std::vector<std::vector<MessageEnd>>;

// Per message, which other messages it reaches in the graph that comm_cycles.hpp
// describes (messages and explicit gap nodes).
std::vector<std::vector<char>> naive_reach(const Ends& ends, int num_messages) {
  std::vector<std::vector<int>> succ(num_messages);
  for (const auto& rank : ends) {
    std::vector<std::vector<int>> batches;
    for (std::size_t i = 0; i < rank.size(); ++i) {
      if (i == 0 || rank[i].slot() != rank[i - 1].slot()) batches.emplace_back();
      batches.back().push_back(rank[i].msg());
    }
    for (std::size_t k = 0; k + 1 < batches.size(); ++k) {
      const int gap = static_cast<int>(succ.size());
      succ.emplace_back(batches[k + 1]);
      for (int m : batches[k]) succ[m].push_back(gap);
    }
  }
  std::vector<std::vector<char>> reach(num_messages, std::vector<char>(succ.size(), 0));
  for (int m = 0; m < num_messages; ++m) {
    std::vector<int> todo = succ[m];
    while (!todo.empty()) {
      const int v = todo.back();
      todo.pop_back();
      if (reach[m][v]) continue;
      reach[m][v] = 1;
      for (int w : succ[v]) todo.push_back(w);
    }
  }
  return reach;
}

// A random placement: each message gets a send end and a receive end on two
// different ranks, in random slots.
Ends random_ends(std::mt19937& rng, int pp, int num_messages, int slots) {
  Ends ends(pp);
  for (int m = 0; m < num_messages; ++m) {
    const int a = static_cast<int>(rng() % pp);
    const int b = (a + 1 + static_cast<int>(rng() % (pp - 1))) % pp;
    ends[a].emplace_back(static_cast<int>(rng() % slots), true, m);
    ends[b].emplace_back(static_cast<int>(rng() % slots), false, m);
  }
  for (auto& rank : ends) std::sort(rank.begin(), rank.end());
  return ends;
}

std::string describe(const Ends& ends) {
  std::string out;
  for (std::size_t r = 0; r < ends.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (MessageEnd e : ends[r])
      out += " " + std::string(e.is_send() ? "S" : "R") + std::to_string(e.msg()) + "@" + std::to_string(e.slot());
    out += "\n";
  }
  return out;
}

TEST(CommCycles, MatchesNaiveReachabilityOnRandomGraphs) {
  std::mt19937 rng(7);
  int cyclic_graphs = 0, acyclic_graphs = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int pp = 2 + static_cast<int>(rng() % 4);
    const int n = 1 + static_cast<int>(rng() % 14);
    const int slots = 1 + static_cast<int>(rng() % 8);
    const Ends ends = random_ends(rng, pp, n, slots);
    const CommCycles got(ends, n);
    const auto reach = naive_reach(ends, n);
    bool any_cycle = false;
    for (int m = 0; m < n; ++m) {
      const bool on_cycle = reach[m][m];
      any_cycle |= on_cycle;
      ASSERT_EQ(got.component(m) >= 0, on_cycle) << "message " << m << "\n" << describe(ends);
      if (on_cycle) {
        ASSERT_LT(got.component(m), got.num_components());
      }
      for (int k = 0; k < n; ++k) {
        if (!on_cycle || !reach[k][k]) continue;
        const bool together = reach[m][k] && reach[k][m];
        ASSERT_EQ(got.component(m) == got.component(k), together) << "messages " << m << ", " << k << "\n" << describe(ends);
      }
    }
    ASSERT_EQ(got.acyclic(), !any_cycle) << describe(ends);
    (any_cycle ? cyclic_graphs : acyclic_graphs)++;
  }
  // The sweep exercises both answers.
  EXPECT_GT(cyclic_graphs, 300);
  EXPECT_GT(acyclic_graphs, 300);
}

TEST(CommCycles, TwoRanksWaitingForEachOther) {
  // Rank 0 sends 0 then receives 1; rank 1 sends 1 then receives 0, each in
  // its own batch: both block on their first send.
  const Ends ends = {{MessageEnd(0, true, 0), MessageEnd(1, false, 1)},
                     {MessageEnd(0, true, 1), MessageEnd(1, false, 0)}};
  const CommCycles c(ends, 2);
  EXPECT_FALSE(c.acyclic());
  EXPECT_EQ(c.num_components(), 1);
  EXPECT_EQ(c.component(0), 0);
  EXPECT_EQ(c.component(1), 0);
  // The same messages in one batch per rank meet.
  const Ends batched = {{MessageEnd(0, true, 0), MessageEnd(0, false, 1)},
                        {MessageEnd(0, true, 1), MessageEnd(0, false, 0)}};
  EXPECT_TRUE(CommCycles(batched, 2).acyclic());
}

TEST(CommCycles, MessagesDownstreamOfACycleAreNotOnIt) {
  // Messages 0 and 1 form the cycle above; 2 follows on both ranks.
  const Ends ends = {{MessageEnd(0, true, 0), MessageEnd(1, false, 1), MessageEnd(2, true, 2)},
                     {MessageEnd(0, true, 1), MessageEnd(1, false, 0), MessageEnd(2, false, 2)}};
  const CommCycles c(ends, 3);
  EXPECT_EQ(c.num_components(), 1);
  EXPECT_EQ(c.component(2), -1);
}

}  // namespace
}  // namespace hp::schedule
