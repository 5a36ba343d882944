// Place: where one rank sits in a training job, laid out by comm/mesh.hpp:
// its pipeline (the pp group, rank i holding stage i), its data-parallel
// replica, the tp and cp groups its stages are split over, and the ranks its
// gradients are averaged over (the replicas' ranks of the same shards,
// dp x cp). Used by the training loop and by verify.
//
// Contract: make_place is collective over the job's group (it makes the
// mesh's subgroups); the Place borrows that group, which must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "comm/mesh.hpp"
#include "model/transformer_config.hpp"
#include "runtime/microbatch.hpp"
#include "train/task.hpp"

namespace hp::runtime {
class Pipeline;
}

namespace hp::train {

struct Place {
  std::optional<comm::Mesh> mesh;
  comm::ProcessGroup* world = nullptr;
  comm::ProcessGroup* pp = nullptr;
  comm::ProcessGroup* tp = nullptr;
  comm::ProcessGroup* average = nullptr;  // dp x cp
  int world_rank = 0;
  int stage_rank = 0;
  int replica = 0;
  int replicas = 1;
  model::ModelParallel parallel;
  // Whether this rank writes checkpoints: the first of its tp, cp and dp groups.
  bool writes() const { return replica == 0 && parallel.tensor.rank == 0 && parallel.context.rank == 0; }
};

// world may be null (one process); throws std::invalid_argument when
// pp x dp x tp x cp is not its size.
Place make_place(comm::ProcessGroup* world, int pp, int dp, int tp, int cp);

// Which of a Task's batch functions to read (Task::batch or Task::eval_batch).
using Fetch = std::vector<runtime::MicroBatch> (Task::*)(std::int64_t, int, const runtime::Reads&) const;

// This replica's micro-batches of batch `index`: its slice of the global
// batch of every replica's, filled where this rank reads.
std::vector<runtime::MicroBatch> replica_batch(const Task& task, Fetch fetch, std::int64_t index,
                                               const runtime::Pipeline& pipeline, const Place& at);

}  // namespace hp::train
