// The embedded VL dataset's plain arrays (data/vl_data.hpp) as tensors.
#pragma once

#include <ATen/ATen.h>

#include "data/vl_data.hpp"

namespace hp::testing {

struct VLTensors {
  at::Tensor images;    // [rows, 3, S, S] in dtype
  at::Tensor captions;  // int64 [rows, kVLCaptionTokens]
};

inline VLTensors make_vl_tensors(int image_size, int rows, std::uint64_t seed, std::int64_t first_index,
                                 c10::ScalarType dtype) {
  const data::VLBatch b = data::make_vl_batch(image_size, rows, seed, first_index);
  VLTensors t;
  t.images = at::tensor(b.images, at::kFloat).view({rows, data::kVLChannels, image_size, image_size}).to(dtype);
  t.captions = at::tensor(b.captions, at::kLong).view({rows, data::kVLCaptionTokens});
  return t;
}

}  // namespace hp::testing
