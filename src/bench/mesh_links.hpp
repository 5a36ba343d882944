// The links a bench row's simulation prices, from timed collectives of this
// rank's groups: the tensor-parallel and data-parallel all-reduces (latency
// and bandwidth of a ring) and MPipe's parameter broadcast.
//
// Contract: each function is collective over the groups it names; every
// pipeline rank prices the links as its own groups measured them.
#pragma once

#include <cstdint>

#include "runtime/rank_model.hpp"
#include "schedule/schedule.hpp"
#include "schedule/simulate.hpp"
#include "train/place.hpp"

namespace hp::bench {

// This rank's share of its stages' gradients, in bytes.
double rank_grad_bytes(const schedule::CostModel& cm, const schedule::ScheduleOptions& layout, int rank);

// The mesh's links in `cm`: the tp group's at the mean size of a forward's
// all-reduces (the activations'), each after `layer_forward_ms / tp` of
// sleep (an emulated layer's share); the data-parallel group's at one bucket
// of `bucket_bytes`, as the reducer runs a bucket. The data-parallel groups
// time theirs one at a time, as a step's stages average at different times
// (1F1B's last stage first), where all at once they would share the cores.
// Collective over the job.
void price_mesh_links(const train::Place& at, const schedule::ScheduleOptions& layout, double layer_forward_ms,
                      std::int64_t bucket_bytes, schedule::CostModel& cm);

// MPIPE_PARAM_BROADCAST's bytes and bandwidth in `cm`, from broadcasts of
// copies of the preprocess parameters (the best of three: one alone catches
// a descheduled rank). Collective over `group`.
void price_broadcast(const runtime::Preprocess& preprocess, comm::ProcessGroup& group, schedule::CostModel& cm);

}  // namespace hp::bench
