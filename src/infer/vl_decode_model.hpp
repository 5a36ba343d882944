// The VL model as a decoder (infer/decode_model.hpp): its text body decodes
// as the GPT does (infer/gpt_decode_model.hpp), and the first stage puts the
// whole vision tower's features of the micro's image before the caption's
// first tokens, as training does (model/vl_stages.hpp). Parameters have the
// training names, so a checkpoint of any training layout (MPipe included)
// loads into any decoding layout.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "infer/decode_model.hpp"
#include "model/vl_stages.hpp"

namespace hp::infer {

// images: one [rows, 3, S, S] tensor (the text dtype) per micro-batch; only
// the rank of stage 0 reads them (others may pass undefined tensors).
DecodeModel build_vl_decode_model(const model::VLStagesOptions& options, const schedule::ScheduleOptions& layout,
                                  int rank, std::vector<at::Tensor> images);

}  // namespace hp::infer
