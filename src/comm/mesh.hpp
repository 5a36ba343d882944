// Mesh: one rank's process groups of every parallel dimension of the job,
// laid out as comm/mesh_layout.hpp says (Megatron's order: tp, cp, dp, pp).
//
// Contract: Mesh::create is collective over the job's group: every rank calls
// it with the same shape and makes its groups in the same order (tp, cp, dp,
// pp). A dimension of size 1 has no group (group() is null) and a mesh of one
// dimension uses the job's group itself. The Mesh borrows the job's group,
// which must outlive it.
#pragma once

#include <memory>
#include <vector>

#include "comm/mesh_layout.hpp"

namespace hp::comm {

class ProcessGroup;

class Mesh {
 public:
  // Collective over `world` (whose size must be shape.world()).
  static Mesh create(ProcessGroup& world, const MeshShape& shape);
  Mesh(Mesh&&) noexcept;
  Mesh& operator=(Mesh&&) noexcept;
  ~Mesh();

  const MeshShape& shape() const { return shape_; }
  const MeshCoord& coord() const { return coord_; }
  // Null for a dimension of size 1.
  ProcessGroup* group(MeshDim dim) const;
  // The ranks that hold the same shards of the same stages (Megatron's data
  // parallel group with context parallelism): differing in dp and cp only,
  // cp fastest. Gradients are averaged over it. Null when dp x cp is 1.
  ProcessGroup* data_parallel_with_context() const { return dp_cp_; }
  ProcessGroup& world() const { return *world_; }

 private:
  Mesh() = default;
  MeshShape shape_;
  MeshCoord coord_;
  ProcessGroup* world_ = nullptr;
  std::vector<std::unique_ptr<ProcessGroup>> owned_;
  ProcessGroup* groups_[4] = {nullptr, nullptr, nullptr, nullptr};
  ProcessGroup* dp_cp_ = nullptr;
};

}  // namespace hp::comm
