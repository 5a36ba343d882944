// DecodeModel: what a model family hands the decoder (infer/decoder.hpp), the
// generation twin of runtime::RankModel: one rank's stages, which keep a
// cache per micro-batch (one prompt each) between forward runs.
//
// Contract: before every forward run the decoder calls begin(m, start,
// length) for every micro m on every rank: that run's input of micro m covers
// positions [start, start + length) of its sequence, and start 0 begins a new
// sequence (the stages forget what they cached for m). A stage finds the
// micro it runs in MicroBatch::extra, an int64 tensor [1] holding m (the
// decoder fills it on every rank). The last stage returns logits
// [rows, length, vocab_size].
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/rank_model.hpp"

namespace hp::infer {

struct DecodeModel {
  runtime::RankModel stages;  // its output_spec must follow begin()
  std::function<void(int micro, std::int64_t start, std::int64_t length)> begin;
  std::int64_t vocab_size = 0;
  std::int64_t max_positions = 0;  // longest sequence the model can hold
};

}  // namespace hp::infer
