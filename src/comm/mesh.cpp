#include "comm/mesh.hpp"

#include <sstream>
#include <stdexcept>

#include "comm/process_group.hpp"

namespace hp::comm {
namespace {

constexpr MeshDim kDims[] = {MeshDim::TP, MeshDim::CP, MeshDim::DP, MeshDim::PP};

int index_of(MeshDim dim) { return static_cast<int>(dim); }

}  // namespace

int MeshShape::size(MeshDim dim) const {
  switch (dim) {
    case MeshDim::TP: return tp;
    case MeshDim::CP: return cp;
    case MeshDim::DP: return dp;
    case MeshDim::PP: return pp;
  }
  return 1;
}

int MeshCoord::at(MeshDim dim) const {
  switch (dim) {
    case MeshDim::TP: return tp;
    case MeshDim::CP: return cp;
    case MeshDim::DP: return dp;
    case MeshDim::PP: return pp;
  }
  return 0;
}

std::string mesh_dim_name(MeshDim dim) {
  switch (dim) {
    case MeshDim::TP: return "tp";
    case MeshDim::CP: return "cp";
    case MeshDim::DP: return "dp";
    case MeshDim::PP: return "pp";
  }
  return "?";
}

MeshCoord mesh_coord(const MeshShape& s, int rank) {
  if (rank < 0 || rank >= s.world())
    throw std::invalid_argument("rank " + std::to_string(rank) + " is not in the mesh " + describe_mesh(s));
  MeshCoord c;
  c.tp = rank % s.tp;
  rank /= s.tp;
  c.cp = rank % s.cp;
  rank /= s.cp;
  c.dp = rank % s.dp;
  c.pp = rank / s.dp;
  return c;
}

int mesh_rank(const MeshShape& s, const MeshCoord& c) { return c.tp + s.tp * (c.cp + s.cp * (c.dp + s.dp * c.pp)); }

std::vector<int> mesh_group_ranks(const MeshShape& s, int rank, MeshDim dim) {
  MeshCoord c = mesh_coord(s, rank);
  std::vector<int> out;
  for (int i = 0; i < s.size(dim); ++i) {
    switch (dim) {
      case MeshDim::TP: c.tp = i; break;
      case MeshDim::CP: c.cp = i; break;
      case MeshDim::DP: c.dp = i; break;
      case MeshDim::PP: c.pp = i; break;
    }
    out.push_back(mesh_rank(s, c));
  }
  return out;
}

std::string describe_mesh(const MeshShape& s) {
  std::ostringstream os;
  os << "tp " << s.tp << " x cp " << s.cp << " x dp " << s.dp << " x pp " << s.pp << " = " << s.world() << " ranks";
  return os.str();
}

std::vector<std::string> describe_mesh_groups(const MeshShape& s, MeshDim dim) {
  std::vector<std::string> lines;
  for (int r = 0; r < s.world(); ++r) {
    const auto ranks = mesh_group_ranks(s, r, dim);
    if (ranks.front() != r) continue;  // each group once, named by its first rank
    std::ostringstream os;
    os << mesh_dim_name(dim) << " group " << lines.size() << ": ranks";
    for (int x : ranks) os << " " << x;
    lines.push_back(os.str());
  }
  return lines;
}

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
  return m;
}

Mesh::Mesh(Mesh&&) noexcept = default;
Mesh& Mesh::operator=(Mesh&&) noexcept = default;
Mesh::~Mesh() = default;

ProcessGroup* Mesh::group(MeshDim dim) const { return groups_[index_of(dim)]; }

}  // namespace hp::comm
