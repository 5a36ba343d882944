#include "train/place.hpp"

#include <iterator>
#include <stdexcept>
#include <string>

#include "comm/process_group.hpp"
#include "runtime/pipeline.hpp"

namespace hp::train {

Place make_place(comm::ProcessGroup* world, int pp, int dp, int tp, int cp) {
  Place p;
  p.world = world;
  p.pp = world;
  p.replicas = dp;
  if (!world) return p;
  if (world->world_size() != pp * dp * tp * cp)
    throw std::invalid_argument("model.tensor_parallel.size " + std::to_string(tp) + " x model.context_parallel.size " + std::to_string(cp) + " x train.dp " +
                                std::to_string(dp) + " x " + std::to_string(pp) + " pipeline ranks is not the job's " +
                                std::to_string(world->world_size()) + " ranks");
  p.world_rank = world->rank();
  p.stage_rank = world->rank();
  if (dp == 1 && tp == 1 && cp == 1) return p;
  comm::MeshShape shape;
  shape.tp = tp;
  shape.cp = cp;
  shape.dp = dp;
  shape.pp = pp;
  p.mesh = comm::Mesh::create(*world, shape);
  p.pp = p.mesh->group(comm::MeshDim::PP);
  p.tp = p.mesh->group(comm::MeshDim::TP);
  p.average = p.mesh->data_parallel_with_context();
  p.stage_rank = p.mesh->coord().pp;
  p.replica = p.mesh->coord().dp;
  p.parallel.tensor.size = tp;
  p.parallel.tensor.rank = p.mesh->coord().tp;
  p.parallel.tensor.group = p.tp;
  p.parallel.context.size = cp;
  p.parallel.context.rank = p.mesh->coord().cp;
  p.parallel.context.group = p.mesh->group(comm::MeshDim::CP);
  return p;
}


// This replica's micro-batches of batch `index`: its slice of the global
// batch of every replica's (Task::batch), filled where this rank reads.
std::vector<runtime::MicroBatch> replica_batch(const Task& task, Fetch fetch, std::int64_t index,
                                               const runtime::Pipeline& pipeline, const Place& at) {
  const int mb = pipeline.options().schedule.micro_batches;
  runtime::Reads reads = pipeline.reads();
  for (int& m : reads.input_micros) m += at.replica * mb;
  reads.first_micro = at.replica * mb;
  reads.last_micro = (at.replica + 1) * mb;
  auto global = (task.*fetch)(index, at.replicas * mb, reads);
  return std::vector<runtime::MicroBatch>(std::make_move_iterator(global.begin() + at.replica * mb),
                                          std::make_move_iterator(global.begin() + (at.replica + 1) * mb));
}


}  // namespace hp::train
