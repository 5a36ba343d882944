#include "comm/mesh.hpp"

#include "comm/process_group.hpp"

namespace hp::comm {
namespace {

constexpr MeshDim kDims[] = {MeshDim::TP, MeshDim::CP, MeshDim::DP, MeshDim::PP};

int index_of(MeshDim dim) { return static_cast<int>(dim); }

}  // namespace

Mesh Mesh::create(ProcessGroup& world, const MeshShape& shape) {
  if (shape.tp < 1 || shape.cp < 1 || shape.dp < 1 || shape.pp < 1 || shape.world() != world.world_size())
    throw std::invalid_argument("the mesh " + describe_mesh(shape) + " does not cover the job's " +
                                std::to_string(world.world_size()) + " ranks");
  Mesh m;
  m.shape_ = shape;
  m.coord_ = mesh_coord(shape, world.rank());
  m.world_ = &world;
  int dims_used = 0;
  for (MeshDim d : kDims) dims_used += shape.size(d) > 1;
  for (MeshDim d : kDims) {
    if (shape.size(d) == 1) continue;
    if (dims_used == 1) {
      m.groups_[index_of(d)] = &world;
      continue;
    }
    m.owned_.push_back(std::make_unique<ProcessGroup>(
        world.new_group(mesh_group_ranks(shape, world.rank(), d), mesh_dim_name(d))));
    m.groups_[index_of(d)] = m.owned_.back().get();
  }
  if (shape.dp > 1 && shape.cp > 1) {
    const auto ranks = mesh_group_ranks(shape, world.rank(), std::vector<MeshDim>{MeshDim::CP, MeshDim::DP});
    if (static_cast<int>(ranks.size()) == world.world_size()) {
      m.dp_cp_ = &world;
    } else {
      m.owned_.push_back(std::make_unique<ProcessGroup>(world.new_group(ranks, "dp_cp")));
      m.dp_cp_ = m.owned_.back().get();
    }
  } else {
    m.dp_cp_ = shape.cp > 1 ? m.group(MeshDim::CP) : m.group(MeshDim::DP);
  }
  return m;
}

Mesh::Mesh(Mesh&&) noexcept = default;
Mesh& Mesh::operator=(Mesh&&) noexcept = default;
Mesh::~Mesh() = default;

ProcessGroup* Mesh::group(MeshDim dim) const { return groups_[index_of(dim)]; }

}  // namespace hp::comm
