// MeshShape: how a job's ranks are laid out over the parallel dimensions, as
// Megatron's parallel_state lays them out: tensor parallel fastest, then
// context, data and pipeline parallel,
//   rank = tp + TP * (cp + CP * (dp + DP * pp)).
// A dimension's group of a rank is the ranks that differ from it in that
// coordinate only, numbered by it (the pp group of a rank is its pipeline,
// rank i of it holding stage i).
//
// Plain values and arithmetic, header-only and free of LibTorch, so that
// `hyperpipe plan` prints layouts without it; comm/mesh.hpp makes the groups.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace hp::comm {

enum class MeshDim { TP, CP, DP, PP };

inline std::string mesh_dim_name(MeshDim dim) {
  switch (dim) {
    case MeshDim::TP: return "tp";
    case MeshDim::CP: return "cp";
    case MeshDim::DP: return "dp";
    case MeshDim::PP: return "pp";
  }
  return "?";
}

struct MeshShape {
  int tp = 1;
  int cp = 1;
  int dp = 1;
  int pp = 1;
  int world() const { return tp * cp * dp * pp; }
  int& size(MeshDim dim) { return dim == MeshDim::TP ? tp : dim == MeshDim::CP ? cp : dim == MeshDim::DP ? dp : pp; }
  int size(MeshDim dim) const { return const_cast<MeshShape*>(this)->size(dim); }
};

struct MeshCoord {
  int tp = 0;
  int cp = 0;
  int dp = 0;
  int pp = 0;
  int& at(MeshDim dim) { return dim == MeshDim::TP ? tp : dim == MeshDim::CP ? cp : dim == MeshDim::DP ? dp : pp; }
  int at(MeshDim dim) const { return const_cast<MeshCoord*>(this)->at(dim); }
};

// "tp 1 x cp 1 x dp 2 x pp 2 = 4 ranks"
inline std::string describe_mesh(const MeshShape& s) {
  std::ostringstream os;
  os << "tp " << s.tp << " x cp " << s.cp << " x dp " << s.dp << " x pp " << s.pp << " = " << s.world() << " ranks";
  return os.str();
}

inline MeshCoord mesh_coord(const MeshShape& s, int rank) {
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

inline int mesh_rank(const MeshShape& s, const MeshCoord& c) { return c.tp + s.tp * (c.cp + s.cp * (c.dp + s.dp * c.pp)); }

// The ranks of `rank`'s group along `dims` (those that differ from it in
// these coordinates only), the first dimension fastest.
inline std::vector<int> mesh_group_ranks(const MeshShape& s, int rank, const std::vector<MeshDim>& dims) {
  std::vector<int> out;
  int n = 1;
  for (MeshDim d : dims) n *= s.size(d);
  for (int i = 0; i < n; ++i) {
    MeshCoord c = mesh_coord(s, rank);
    int rest = i;
    for (MeshDim d : dims) {
      c.at(d) = rest % s.size(d);
      rest /= s.size(d);
    }
    out.push_back(mesh_rank(s, c));
  }
  return out;
}

// The ranks of `rank`'s group along `dim`, by that coordinate.
inline std::vector<int> mesh_group_ranks(const MeshShape& s, int rank, MeshDim dim) {
  return mesh_group_ranks(s, rank, std::vector<MeshDim>{dim});
}

// Every group of `dim`, each once, in the order of their first ranks.
inline std::vector<std::vector<int>> mesh_groups(const MeshShape& s, MeshDim dim) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < s.world(); ++r) {
    auto ranks = mesh_group_ranks(s, r, dim);
    if (ranks.front() == r) groups.push_back(std::move(ranks));
  }
  return groups;
}

// Every group of `dim` as lines "dp group 0: ranks 0 2".
inline std::vector<std::string> describe_mesh_groups(const MeshShape& s, MeshDim dim) {
  std::vector<std::string> lines;
  for (const auto& ranks : mesh_groups(s, dim)) {
    std::ostringstream os;
    os << mesh_dim_name(dim) << " group " << lines.size() << ": ranks";
    for (int x : ranks) os << " " << x;
    lines.push_back(os.str());
  }
  return lines;
}

}  // namespace hp::comm
