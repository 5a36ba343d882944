// Cycles of the batch precedence graph of placed body messages (internal to
// src/schedule; insert_body_comms' deadlock repair, comm_insert.cpp).
//
// The graph: its nodes are the messages and, per rank, one node for each gap
// between consecutive batches; every message of a batch points to the gap
// after it, the gap to every message of the next batch. It has a cycle
// exactly when a blocking-rendezvous run of the batches deadlocks.
//
// Contract: every rank's ends are sorted (MessageEnd order, so equal slots are
// adjacent: one batch) and every message id in [0, num_messages) has exactly
// two ends, on two different ranks. Reads `ends` only while constructing.
// Thread-compatible.
//
// Cost: linear. Two rendezvous runs (forward and backward) find the messages
// that can lie on a cycle: a message the forward run completes has no cycle
// upstream, one the backward run completes none downstream. Only the rest go
// to Tarjan's algorithm, and when the forward run completes everything (the
// usual case: every repair round but the first) nothing does. Memory is a few
// ints per message; on a machine where touching fresh pages is slow that is
// most of the cost.
#pragma once

#include <vector>

#include "schedule/message_end.hpp"

namespace hp::schedule {

class CommCycles {
 public:
  CommCycles(const std::vector<std::vector<MessageEnd>>& ends, int num_messages);

  bool acyclic() const { return num_components_ == 0; }
  // Strongly connected components that hold a cycle, numbered 0..count-1.
  int num_components() const { return num_components_; }
  // The component of a message on a cycle, or -1 when it lies on none.
  int component(int msg) const { return component_.empty() ? -1 : component_[msg]; }

 private:
  std::vector<int> component_;  // per message; empty when acyclic
  int num_components_ = 0;
};

}  // namespace hp::schedule
