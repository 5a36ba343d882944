// The schedule advisor (`hyperpipe plan --advise`): for a model described by
// its layers' costs it generates every candidate layout (1F1B; interleaved
// with each v that splits the layers evenly; MPipe with each v, T, overflow
// mode and owner-backward where they differ, and at v 1 around each body),
// simulates each with costs derived from the description, and ranks them by
// predicted step time, then by peak activation memory. Pure computation on the schedule engine;
// deterministic, so every rank of a job reaches the same choice.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.hpp"
#include "schedule/simulate.hpp"

namespace hp::schedule {

// A model as a pipeline sees it, in the simulator's time units per
// micro-batch. Stage 0 runs [embedding][tower blocks][its body layers]:
//   a GPT: the embedding, no tower; MPipe's T counts the body layers
//          transposed with the embedding (T = 1: embedding + first layer);
//   a VL model: the patch embedding and projector as "embedding", the vision
//          tower's blocks as the tower; T counts tower blocks (1..tower_layers).
// T = 0 transposes only the data load. Parameter bytes are what MPipe
// broadcasts each step for the transposed part.
struct ModelProfile {
  int layers = 8;  // body layers, split evenly over pp x v stages
  double layer_f = 1.0, layer_b = 2.0, layer_bytes = 0.0;
  double embed_f = 0.0, embed_b = 0.0, embed_bytes = 0.0;
  int tower_layers = 0;
  double tower_f = 0.0, tower_b = 0.0, tower_bytes = 0.0;  // per tower block
  bool frozen_preprocess = false;  // embedding and tower hold no trainable parameter
  // Communication, as CostModel takes it.
  double p2p_latency = 0.0, p2p_bw = 0.0, broadcast_bw = 0.0;
  double activation_bytes = 0.0, input_bytes = 0.0;

  // Throws std::invalid_argument naming the field (profile.layers, ...).
  void validate() const;
};

struct Candidate {
  ScheduleOptions options;
  CostModel costs;            // what the simulation used
  std::string name;           // "1f1b", "interleaved v=2", "mpipe v=1 T=1 full", ...
  double step_time = 0.0;
  double bubble_fraction = 0.0;
  double peak_layer_activations = 0.0;  // max over ranks: stored micro-batch activations x layers per chunk
  double broadcast_time = 0.0;          // MPipe: rank 0's parameter broadcast per step
  double recompute_time = 0.0;          // MPipe: rank 0's preprocess backward (recompute included)
};

struct Advice {
  std::vector<Candidate> ranked;     // fastest first; ties: less memory first
  std::vector<std::string> skipped;  // layouts that cannot run, and why
};

// Candidates for pp ranks and micro_batches per step. Throws
// std::invalid_argument when the profile is invalid or nothing can run.
Advice advise(const ModelProfile& model, int pp, int micro_batches);

// The costs the simulator gets for one layout of the model.
CostModel profile_costs(const ModelProfile& model, const ScheduleOptions& layout);

// Why the winner wins: its margin over the best candidate of each other
// family (1F1B, interleaved, MPipe) and what decides it (bubble, broadcast,
// recompute, memory), a few lines of text.
std::string explain(const Advice& advice);

}  // namespace hp::schedule
