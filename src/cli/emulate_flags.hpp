// --emulate-layer-ms F[,B] (train, verify, bench): each layer's forward and
// optionally backward milliseconds on emulated devices
// (model/emulated_device.hpp); B defaults to twice F.
#pragma once

#include <string>

namespace hp::model {
struct EmulatedLayer;
}

namespace hp::cli {

// The schema's check: "" when `spec` is F or F,B with each in [0, 60000],
// else the error ("'3,x': expected F or F,B, ...").
std::string check_emulate_layer_ms(const std::string& spec);

// `base` with the times of `spec` ("" leaves them); spec must pass the check.
model::EmulatedLayer emulate_from_flag(const std::string& spec, model::EmulatedLayer base);

}  // namespace hp::cli
