// The VL model as a user of the runtime's API: a ViT tower (model/vision.hpp)
// and projector in front of a GPT text body. Stage 0 (rank 0, chunk 0) holds
// the tower blocks it runs, the text embedding and its text layers; its
// forward reads the caption tokens of the micro-batch (MicroBatch::extra)
// besides its input (pixels, or MPipe's transposed features). The loss is
// over the caption: the image patches' logits predict nothing.
//
// MPipe: T counts tower blocks, 0 <= T <= --vision-layers; the preprocess is
// blocks [0, T) (with the projector when T = V) and stage 0 keeps [T, V). A
// frozen tower (VisionConfig::frozen) makes a frozen preprocess.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "model/gpt_stages.hpp"
#include "model/vision_config.hpp"

namespace hp::model {

struct VLStagesOptions {
  GPTStagesOptions text;  // text body; text.seq_len counts caption tokens only
  VisionConfig vision;
};

// Checks the text body and the tower against the layout (text positions
// beyond the patches, T <= vision.num_layers). Throws std::invalid_argument naming the option.
void check_vl_layout(const VLStagesOptions& o, const schedule::ScheduleOptions& layout);

runtime::RankModel build_vl_stages(const VLStagesOptions& o, const schedule::ScheduleOptions& layout, int rank);

// Captions [rows, caption tokens] and images [rows, 3, S, S] per micro-batch
// -> input (the images; may be undefined where a rank does not read them),
// extra (the caption inputs) and target (the caption shifted by one).
std::vector<runtime::MicroBatch> vl_micro_batches(const std::vector<at::Tensor>& captions,
                                                  const std::vector<at::Tensor>& images);

}  // namespace hp::model
