// The GPT as a user of the runtime's API: one rank's stages (runtime::RankModel)
// for a pipeline layout, from a TransformerConfig and a layer partition.
//
// Every GPT-specific rule of pipelining lives here: the partition of
// --layers over pp * vpp stages (or --layers-per-stage), MPipe's preprocess
// (the embedding and layers [0, T)) and body0 (layers [T, end of chunk 0)),
// T < the layers of stage 0's first chunk, the tied word embedding, the LM
// loss. Parameter names are global (model/gpt.hpp), so any layout's union of
// stages is the single-process model.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/partition.hpp"
#include "model/transformer_config.hpp"
#include "runtime/rank_model.hpp"
#include "schedule/schedule.hpp"

namespace hp::model {

struct GPTStagesOptions {
  TransformerConfig config;
  std::vector<int> layers_per_stage;  // explicit counts by global stage; empty = even split
  // When both are > 0, every micro-batch is [micro_batch_rows, seq_len] tokens
  // and the runtime is given the receive shapes; otherwise it learns them on
  // the first step.
  std::int64_t micro_batch_rows = 0;
  std::int64_t seq_len = 0;
};

// The partition of the model's layers over the layout's stages.
Partition gpt_partition(const GPTStagesOptions& o, const schedule::ScheduleOptions& layout);

// Checks the config, the partition and, under MPipe, T against stage 0's
// first chunk (0 <= T < its layers). Throws std::invalid_argument naming the option
// (model.num_layers, schedule.mpipe.transpose_layers, ...).
void check_gpt_layout(const GPTStagesOptions& o, const schedule::ScheduleOptions& layout);

// This rank's stages under `layout` (after check_gpt_layout). Under MPipe with
// T >= 1 every rank gets the preprocess and rank 0's stage 0 is body0.
runtime::RankModel build_gpt_stages(const GPTStagesOptions& o, const schedule::ScheduleOptions& layout, int rank);

class MultiTokenPrediction;

// The GPT's parameters held by two stages: the word embedding, which the last
// stage also holds for a tied head or for MTP's token embeddings.
std::vector<std::string> gpt_tied_parameters(const TransformerConfig& config);

// Reports the MTP depths' mean losses of a step as the RankModel's metrics
// (mtp_loss_1, ...); mtp is the final stage's module, null on other ranks.
void add_mtp_metrics(runtime::RankModel& m, int depth, std::shared_ptr<MultiTokenPrediction> mtp);

// Every stage's output [rows, seq, config.residual_width()] in config's dtype,
// the shapes a model of fixed-size micro-batches gives the runtime.
std::function<runtime::TensorSpec(int stage, int micro)> fixed_output_spec(std::int64_t rows, std::int64_t seq,
                                                                           const TransformerConfig& config);

// Token ids [rows, seq + 1] per micro-batch -> input [:, :-1], target [:, 1:].
std::vector<runtime::MicroBatch> lm_micro_batches(const std::vector<at::Tensor>& tokens);

}  // namespace hp::model
