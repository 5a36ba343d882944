// The VL family (--model vl): a vision tower and projector before the GPT
// text body, on synthetic captioned images (train::VlTask); decoding
// captions images.
#pragma once

#include "family/model_family.hpp"

namespace hp::family {

ModelFamily vl_family();

}  // namespace hp::family
