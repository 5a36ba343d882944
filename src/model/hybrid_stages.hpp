// The Hybrid model as a user of the runtime's API: one rank's stages for a
// pipeline layout, from the pattern's segments (model/hybrid_pattern.hpp).
// The residual width between stages is hidden x streams (mHC) on every edge,
// including the last rank's send to the first rank's next virtual chunk.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/hybrid.hpp"
#include "runtime/rank_model.hpp"
#include "schedule/schedule.hpp"

namespace hp::model {

struct HybridStagesOptions {
  HybridConfig config;
  // When both are > 0 every micro-batch is [micro_batch_rows, seq_len] tokens
  // and the runtime is given the receive shapes; otherwise it learns them.
  std::int64_t micro_batch_rows = 0;
  std::int64_t seq_len = 0;
};

// The config, the pattern's segments against pp * vpp stages, and what the
// Hybrid model does not run (MPipe with transposed layers). Throws
// std::invalid_argument naming the option.
void check_hybrid_layout(const HybridStagesOptions& o, const schedule::ScheduleOptions& layout);

// Global stage `stage`'s chunk: its segment's layers, the embedding on
// stage 0, the head (and MTP) on the last stage.
std::shared_ptr<HybridChunk> build_hybrid_chunk(const HybridConfig& config, const schedule::ScheduleOptions& layout,
                                                int stage);

// Parameters held by more than one stage: with MTP on a later stage, the
// word embedding (the final stage's copy is stage 0's).
std::vector<std::string> hybrid_tied_parameters(const HybridConfig& config, const schedule::ScheduleOptions& layout);

// This rank's stages; the MoE balance loss and the MTP loss weigh each
// micro-batch by 1 / layout.micro_batches, as the main loss does.
runtime::RankModel build_hybrid_stages(const HybridStagesOptions& o, const schedule::ScheduleOptions& layout,
                                       int rank);

}  // namespace hp::model
