// Mesh: how a job's ranks are laid out over the parallel dimensions and the
// process groups of each, as Megatron's parallel_state lays them out: tensor
// parallel fastest, then context, data and pipeline parallel,
//   rank = tp + TP * (cp + CP * (dp + DP * pp)).
// A dimension's group of a rank is the ranks that differ from it in that
// coordinate only, numbered by it (the pp group of a rank is its pipeline,
// rank i of it holding stage i).
//
// Contract: MeshShape and the layout functions are plain values. Mesh::create
// is collective over the job's group: every rank calls it with the same shape
// and makes its groups in the same order (tp, cp, dp, pp). A dimension of size
// 1 has no group (group() is null) and a mesh of one dimension uses the job's
// group itself. The Mesh borrows the job's group, which must outlive it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hp::comm {

class ProcessGroup;

enum class MeshDim { TP, CP, DP, PP };

struct MeshShape {
  int tp = 1;
  int cp = 1;
  int dp = 1;
  int pp = 1;
  int world() const { return tp * cp * dp * pp; }
  int size(MeshDim dim) const;
};

struct MeshCoord {
  int tp = 0;
  int cp = 0;
  int dp = 0;
  int pp = 0;
  int at(MeshDim dim) const;
};

std::string mesh_dim_name(MeshDim dim);  // "tp", "cp", "dp", "pp"
MeshCoord mesh_coord(const MeshShape& shape, int rank);
int mesh_rank(const MeshShape& shape, const MeshCoord& coord);
// The ranks of `rank`'s group along `dim`, by that coordinate.
std::vector<int> mesh_group_ranks(const MeshShape& shape, int rank, MeshDim dim);
// "tp 1 x cp 1 x dp 2 x pp 2 = 4 ranks"
std::string describe_mesh(const MeshShape& shape);
// Every group of `dim` as lines "dp group 0: ranks 0 2", for `hyperpipe plan`.
std::vector<std::string> describe_mesh_groups(const MeshShape& shape, MeshDim dim);

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
  ProcessGroup& world() const { return *world_; }

 private:
  Mesh() = default;
  MeshShape shape_;
  MeshCoord coord_;
  ProcessGroup* world_ = nullptr;
  std::vector<std::unique_ptr<ProcessGroup>> owned_;
  ProcessGroup* groups_[4] = {nullptr, nullptr, nullptr, nullptr};
};

}  // namespace hp::comm
