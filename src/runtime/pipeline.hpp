// Pipeline: one rank's share of a pipelined model and the machinery to run a
// training step on it: the rank's stages (as the user handed them in a
// RankModel), its action list and the Executor. Model-agnostic: the runtime
// runs stages, it does not build them (torch.distributed.pipelining's
// PipelineStage + Schedule, Megatron's forward_backward_func).
//
// Contract: construction and step() are collective over the process group
// (every rank calls them with the same options and micro-batch count, in the
// same order); step() leaves the gradients of this rank's parameters
// accumulated (summed over calls until zero_grad()), tied copies not yet
// summed (reduce_tied_grads does that). Not thread-safe.
//
// Data parallel: with a dp group (the ranks that hold this rank's stages in
// the other replicas of the pipeline), each replica runs its own micro-batches
// and step() leaves every gradient averaged over the replicas
// (runtime/grad_reducer.hpp, overlapped with the backward). Each micro weighs
// its share of the targets of the whole global batch, so the step's loss and
// gradients are those of one pipeline over all replicas' micro-batches; the
// returned loss is the global mean. step(), evaluate() and forward() are then
// collective over the dp group too.
//
// MPipe Transpose (schedule kind MPipe, runtime/mpipe_runtime.hpp): with T >= 1
// every rank hands in the preprocess (rank 0 the trained parameters, the
// others a replica the schedule's broadcast overwrites) and stage 0 holds only
// body0. Rank 0's named_parameters() include the preprocess, the other ranks'
// do not, so each global parameter is counted once by the optimizer, the
// gradient norm and checkpoints.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor_options.hpp"
#include "runtime/rank_model.hpp"
#include "schedule/schedule.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::runtime {

class Executor;
class Stage;
class MPipeRuntime;
class TiedParameters;
class GradReducer;

struct PipelineOptions {
  schedule::ScheduleOptions schedule;  // kind, pp, vpp, micro_batches, group size, MPipe options
  ExecutorOptions executor;
  // Data parallel: the most bytes of one gradient all-reduce (DDP's bucket_cap_mb).
  std::int64_t grad_bucket_bytes = std::int64_t{25} << 20;
};

// Checks what needs neither a model nor a process group: the schedule
// options. Throws std::invalid_argument naming the option.
void validate_pipeline_options(const PipelineOptions& options);

// The step's result, identical on every rank.
struct StepResult {
  double loss = 0.0;         // mean loss over the step's target elements (tokens)
  std::int64_t tokens = 0;   // target elements of the step
  // MPipe: bytes the preprocess broadcast moved from rank 0 this step
  // (payload x receivers); 0 for other schedules and skipped broadcasts.
  std::uint64_t bytes_broadcast = 0;
};

class Pipeline {
 public:
  // Validates the options and the model (stage indices, loss, tied names)
  // before any communication; throws std::invalid_argument. pg (this
  // pipeline's ranks, rank i holding stage i) may be null for a one-rank
  // layout; dp is null without data parallelism. Collective where pg is given
  // (tied-parameter holders; MPipe: every rank checks its preprocess against
  // rank 0's). Both groups must outlive the pipeline.
  Pipeline(const PipelineOptions& options, int rank, comm::ProcessGroup* pg, RankModel model,
           comm::ProcessGroup* dp = nullptr);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One forward/backward over options.schedule.micro_batches micro-batches.
  // A rank fills what it reads: the input of input_micros(), the targets
  // where reads_targets(); extra wherever its stages use it. A pipeline
  // built with schedule.forward_only cannot train: it throws std::logic_error.
  // sync_grads false (DDP's no_sync, for gradient accumulation): leave the
  // gradients unreduced over the dp group; the next step with true averages
  // everything accumulated since.
  StepResult step(const std::vector<MicroBatch>& micros, bool sync_grads = true);

  // Forward only (Megatron's forward_only, torch.distributed.pipelining's
  // eval()): the layout's forward-only schedule under no-grad, each
  // activation freed as soon as it is sent; gradients are untouched.
  // Collective like step(), with the same micro-batch count and fills. The
  // loss is the mean over the targets the last rank was given (0 with
  // tokens 0 when it was given none).
  StepResult evaluate(const std::vector<MicroBatch>& micros);
  // The same run, returning the last stage's output of every micro on the
  // rank that holds it (empty elsewhere): what a decoder samples from.
  std::vector<at::Tensor> forward(const std::vector<MicroBatch>& micros);

  // The micro-batches whose input this rank reads: every micro on the rank
  // of stage 0, the micros it owns under MPipe (spec D4), none elsewhere.
  std::vector<int> input_micros() const;
  // Whether this rank holds the last stage, whose loss reads the targets.
  bool reads_targets() const;
  // All of the above, and whether this rank reads the micro-batches' extra
  // data (it holds stage 0).
  Reads reads() const;

  // This rank's parameters by global name, each once (the preprocess on rank 0 only).
  std::map<std::string, at::Tensor> named_parameters() const;
  // Sums the gradients of tied parameters over every holder. Collective.
  void reduce_tied_grads();
  // Tied names this rank holds whose holder of record is another rank (count
  // them once in a global norm).
  std::vector<std::string> duplicate_parameter_names() const;
  // RankModel::tensor_parallel: the parameters this rank holds a shard of.
  const TensorShards& tensor_parallel_shards() const { return model_.tensor_parallel; }
  bool sequence_parallel() const { return model_.sequence_parallel; }
  void zero_grad();

  int rank() const { return rank_; }
  const PipelineOptions& options() const { return options_; }
  // The training schedule's actions and executor (empty and null under
  // schedule.forward_only).
  const std::vector<schedule::Action>& actions() const { return train_.actions; }
  Executor& executor() { return *train_.executor; }
  // The forward-only schedule's actions.
  const std::vector<schedule::Action>& forward_actions() const { return forward_.actions; }
  // Null unless the schedule is MPipe.
  MPipeRuntime* mpipe() const { return train_.mpipe.get(); }
  // Null without a dp group (or under schedule.forward_only).
  const GradReducer* grad_reducer() const { return reducer_.get(); }

 private:
  // One schedule of the layout and what runs it; the training and the
  // forward-only runner share the stages.
  struct Runner {
    std::vector<schedule::Action> actions;
    std::unique_ptr<Executor> executor;
    std::unique_ptr<MPipeRuntime> mpipe;
    std::uint64_t run(const std::vector<MicroBatch>& micros, const std::vector<double>& weights, double* loss);
  };
  Runner make_runner(schedule::ScheduleOptions layout, const std::map<int, Stage*>& stages);
  void reduce_over_replicas();
  // The loss weights of a step (each micro's share of the targets) and their
  // total; empty where this rank reads no target.
  std::vector<double> loss_weights(const std::vector<MicroBatch>& micros, bool required, double* tokens) const;
  StepResult reduce(double loss, double tokens, std::uint64_t bytes_broadcast) const;
  StepResult run_forward_only(const std::vector<MicroBatch>& micros, std::vector<at::Tensor>* outputs);

  PipelineOptions options_;
  int rank_;
  comm::ProcessGroup* pg_;
  comm::ProcessGroup* dp_;
  RankModel model_;
  NamedTensors counted_;  // parameters this rank counts, tied copies included
  std::vector<std::unique_ptr<Stage>> stages_;
  Runner train_;
  Runner forward_;
  std::unique_ptr<TiedParameters> tied_;
  std::unique_ptr<GradReducer> reducer_;
  bool sync_grads_ = true;  // the current step's
};

}  // namespace hp::runtime
