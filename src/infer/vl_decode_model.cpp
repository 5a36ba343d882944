#include "infer/vl_decode_model.hpp"

#include <ATen/ATen.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "infer/gpt_decode_model.hpp"
#include "model/vision.hpp"

namespace hp::infer {

DecodeModel build_vl_decode_model(const model::VLStagesOptions& options, const schedule::ScheduleOptions& layout,
                                  int rank, std::vector<at::Tensor> images) {
  const model::TransformerConfig& text = options.text.config;
  DecodePrefix prefix;
  prefix.length = options.vision.num_patches();
  if (text.max_seq_len <= prefix.length)
    throw std::invalid_argument("a VL model's text positions (" + std::to_string(text.max_seq_len) +
                                ") must exceed its " + std::to_string(prefix.length) + " image patches");
  if (rank == 0) {  // stage 0 lives on rank 0 in every layout
    auto tower = std::make_shared<model::VisionTower>(options.vision, text, 0, options.vision.num_layers);
    prefix.parameters = tower->global_parameters();
    auto pixels = std::make_shared<std::vector<at::Tensor>>(std::move(images));
    prefix.features = [tower, pixels](int micro) {
      if (micro >= static_cast<int>(pixels->size()) || !pixels->at(micro).defined())
        throw std::logic_error("the VL decoder has no image for micro-batch " + std::to_string(micro));
      return tower->forward(pixels->at(micro));
    };
  }
  return build_prefixed_decode_model(text, layout, rank, 1, std::move(prefix));
}

}  // namespace hp::infer
