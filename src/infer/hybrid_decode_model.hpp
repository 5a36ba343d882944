// The Hybrid model as a decoder (infer/decode_model.hpp): one rank's chunks
// of a layout, each keeping per micro-batch its attention layers' keys and
// values and its Mamba mixers' recurrent state (model/kv_cache.hpp), so a new
// token costs one position. Parameters have the training names, so any
// checkpoint loads into any decoding layout; MTP modules are built (their
// parameters are in the checkpoint) but do not run.
#pragma once

#include <cstdint>

#include "infer/decode_model.hpp"
#include "model/hybrid.hpp"
#include "schedule/schedule.hpp"

namespace hp::infer {

// Checks the config, that the pattern's layers fill pp x vpp stages, and
// refuses mHC on more than one rank (infer/cached_chunks.hpp); throws
// std::invalid_argument naming the option.
void check_hybrid_decode_layout(const model::HybridConfig& config, const schedule::ScheduleOptions& layout);

// rows: sequences per micro-batch (the same in every micro).
DecodeModel build_hybrid_decode_model(const model::HybridConfig& config, const schedule::ScheduleOptions& layout,
                                      int rank, std::int64_t rows);

}  // namespace hp::infer
