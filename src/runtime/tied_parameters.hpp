// TiedParameters: parameters that several stages hold under one global name
// (a tied word embedding: the embedding on stage 0, the LM head on the last
// stage), declared by name (RankModel::tied_parameters), not by model knowledge.
//
// Each holder keeps its own copy and autograd fills each copy's gradient from
// its own stage; reduce_grads() makes every copy hold the sum over all copies
// on all ranks, so identical optimizer updates keep the copies equal. Copies
// on one rank are expected to share storage already (the Pipeline does that).
// The holder of record of a name, the one a global norm or a checkpoint
// counts, is its lowest holding rank.
//
// Contract: construction and reduce_grads() are collective over the process
// group (every rank calls them, in the same order, with the same declared
// names); the group and the tensors must outlive this object. Single-threaded.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "runtime/pipeline_stage.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::runtime {

class TiedParameters {
 public:
  // names: the declared tied names; copies: every parameter this rank counts
  // (several entries per tied name where it holds several copies). pg may be
  // null for a one-rank job. tag_stage: a stage index that names no pipeline
  // edge, for the gradient messages. Finds the holders of every name and
  // throws std::invalid_argument when the ranks declare different names or
  // their copies of a name differ in size.
  TiedParameters(std::vector<std::string> names, const NamedTensors& copies, int rank, comm::ProcessGroup* pg,
                 int tag_stage);

  void reduce_grads();
  // Tied names this rank holds whose holder of record is another rank.
  std::vector<std::string> duplicate_names() const;

 private:
  struct Entry {
    std::string name;
    std::vector<at::Tensor> copies;  // on this rank
    std::vector<int> holders;        // ranks, ascending
  };
  std::vector<Entry> entries_;  // sorted by name: the same order on every rank
  int rank_;
  comm::ProcessGroup* pg_;
  int tag_stage_;
};

}  // namespace hp::runtime
