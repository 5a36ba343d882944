// Pipeline: one rank's share of a pipelined GPT and the machinery to run a
// training step on it: its model chunks, their Stages, its action list and the
// Executor. Every rank of the job builds a Pipeline with the same options.
//
// Contract: step() is collective over the process group (every rank calls it
// with the same micro-batches, in the same order); it leaves the gradients of
// this rank's parameters accumulated (summed over calls until zero_grad()), tied
// copies not yet summed (reduce_tied_grads does that). Not thread-safe.
//
// VL: stage 0 (rank 0, chunk 0) holds the whole vision tower and projector
// before the text embedding and its text layers.
//
// MPipe Transpose (schedule kind MPipe, runtime/mpipe_runtime.hpp): with T >= 1
// every rank holds the preprocess block (GPT: the embedding and layers [0, T);
// VL: tower blocks [0, T), T <= V; a frozen tower is broadcast once),
// rank 0 as the trained parameters, the others as a replica the schedule's
// broadcast overwrites; stage 0's Stage runs body0 (layers [T, end of chunk
// 0)). Rank 0's named_parameters() include the preprocess, the other ranks'
// do not, so each global parameter is counted once by the optimizer, the
// gradient norm and checkpoints.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/transformer_config.hpp"
#include "model/vision_config.hpp"
#include "runtime/executor.hpp"
#include "schedule/schedule.hpp"

namespace hp::comm {
class ProcessGroup;
}
namespace hp::model {
class GPTChunk;
class Partition;
class Preprocess;
class VisionTower;
}  // namespace hp::model

namespace hp::runtime {

class Stage;
class MPipeRuntime;
struct BroadcastStats;

// gpt: token ids -> next tokens. vl: a vision tower over an image, its
// projected patch features in front of the caption's embedded tokens, then
// the text body; the loss is over the caption (model/vision.hpp).
enum class ModelKind { GPT, VL };

struct PipelineOptions {
  schedule::ScheduleOptions schedule;  // kind, pp, vpp, micro_batches, group size
  ModelKind model_kind = ModelKind::GPT;
  // For vl: the text part; max_seq_len covers the patches plus the caption.
  model::TransformerConfig model;
  model::VisionConfig vision;          // vl only
  std::vector<int> layers_per_stage;   // explicit counts by global stage; empty = even split
  ExecutorOptions executor;
};

// Checks everything that needs no process group: the model config, the
// partition, the schedule options and, for MPipe, T against stage 0's first
// chunk (GPT: 0 <= T < its layers; VL: 0 <= T <= --vision-layers). Throws
// std::invalid_argument naming the flag.
void validate_pipeline_options(const PipelineOptions& options);

// The step's result, identical on every rank.
struct StepResult {
  double loss = 0.0;  // token-weighted mean loss over the step's micro-batches
  std::int64_t tokens = 0;
  // MPipe: bytes the preprocess broadcast moved from rank 0 this step
  // (payload x receivers); 0 for other schedules and skipped broadcasts.
  std::uint64_t bytes_broadcast = 0;
};

class Pipeline {
 public:
  // Validates everything (model config, partition, schedule) before touching
  // the process group; throws std::invalid_argument naming the flag. pg may be
  // null for a one-rank layout. MPipe with T >= 1: `preprocess` is the
  // caller's preprocess module (spec D3; null builds the model's own), and
  // construction is collective: every rank checks its preprocess against
  // rank 0's and all throw, naming the ranks that differ.
  Pipeline(const PipelineOptions& options, int rank, comm::ProcessGroup* pg,
           std::shared_ptr<model::Preprocess> preprocess = nullptr);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One forward/backward over the micro-batches (token ids [rows, seq + 1] each:
  // inputs are [:, :-1], labels [:, 1:]; seq may differ between micro-batches
  // only with options.executor.variable_seq_len).
  StepResult step(const std::vector<at::Tensor>& micro_tokens);
  // VL: micro_tokens are the captions, micro_images [rows, 3, S, S] the images.
  // Under MPipe a rank only reads the images of the micros it owns, so the
  // others may be undefined tensors (spec D4, section 5.5).
  StepResult step(const std::vector<at::Tensor>& micro_tokens, const std::vector<at::Tensor>& micro_images);
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
  // Null unless the schedule is MPipe.
  MPipeRuntime* mpipe() const { return mpipe_.get(); }
  // This rank's GPT chunks by chunk index (under MPipe with T >= 1, chunk 0 of
  // rank 0 is body0, without the embedding and the first T layers).
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
  std::shared_ptr<model::Preprocess> preprocess_;  // MPipe, T >= 1: on every rank
  std::shared_ptr<model::VisionTower> vision_;     // VL, rank 0: the tower blocks stage 0 runs
  std::int64_t prefix_len_ = 0;                    // VL: image patches ahead of the caption
  std::unique_ptr<MPipeRuntime> mpipe_;
  std::vector<std::int64_t> seq_lens_;  // per micro, for receive shapes
  std::vector<std::int64_t> rows_;
};

}  // namespace hp::runtime
