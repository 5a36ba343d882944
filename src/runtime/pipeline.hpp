// Pipeline: one rank's share of a pipelined GPT and the machinery to run a
// training step on it: its model chunks, their Stages, its action list and the
// Executor. Every rank of the job builds a Pipeline with the same options.
//
// Contract: step() is collective over the process group (every rank calls it
// with the same micro-batches, in the same order); it leaves the gradients of
// this rank's parameters accumulated (summed over calls until zero_grad()), tied
// copies not yet summed (reduce_tied_grads does that). Not thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/transformer_config.hpp"
#include "runtime/executor.hpp"
#include "schedule/schedule.hpp"

namespace hp::comm {
class ProcessGroup;
}
namespace hp::model {
class GPTChunk;
class Partition;
}  // namespace hp::model

namespace hp::runtime {

class Stage;

struct PipelineOptions {
  schedule::ScheduleOptions schedule;  // kind, pp, vpp, micro_batches, group size
  model::TransformerConfig model;
  std::vector<int> layers_per_stage;   // explicit counts by global stage; empty = even split
  ExecutorOptions executor;
};

// The step's result, identical on every rank.
struct StepResult {
  double loss = 0.0;  // token-weighted mean loss over the step's micro-batches
  std::int64_t tokens = 0;
};

class Pipeline {
 public:
  // Validates everything (model config, partition, schedule) before touching
  // the process group; throws std::invalid_argument naming the flag. pg may be
  // null for a one-rank layout.
  Pipeline(const PipelineOptions& options, int rank, comm::ProcessGroup* pg);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One forward/backward over the micro-batches (token ids [rows, seq + 1] each:
  // inputs are [:, :-1], labels [:, 1:]; seq may differ between micro-batches
  // only with options.executor.variable_seq_len).
  StepResult step(const std::vector<at::Tensor>& micro_tokens);
  // Splits a batch [rows, seq + 1] into options.schedule.micro_batches and steps.
  StepResult step_batch(const at::Tensor& tokens);

  // This rank's parameters by global name (a tied copy appears once per rank).
  std::map<std::string, at::Tensor> named_parameters() const;
  // Sums the gradients of parameters held on several stages (tied embeddings)
  // so every copy holds the total. Collective.
  void reduce_tied_grads();
  // Names this rank holds that another rank also holds (count them once in a
  // global norm: returned only on the rank that is not the owner of record).
  std::vector<std::string> duplicate_parameter_names() const;
  void zero_grad();

  int rank() const { return rank_; }
  const PipelineOptions& options() const { return options_; }
  const std::vector<schedule::Action>& actions() const { return actions_; }
  Executor& executor() { return *executor_; }
  const std::vector<std::shared_ptr<model::GPTChunk>>& chunks() const { return chunks_; }

 private:
  PipelineOptions options_;
  int rank_;
  comm::ProcessGroup* pg_;
  std::unique_ptr<model::Partition> partition_;
  std::vector<std::shared_ptr<model::GPTChunk>> chunks_;  // by chunk index
  std::vector<std::unique_ptr<Stage>> stages_;
  std::vector<schedule::Action> actions_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::int64_t> seq_lens_;  // per micro, for receive shapes
  std::vector<std::int64_t> rows_;
};

}  // namespace hp::runtime
