// The emulated-device flags shared by train and bench
// (model/emulated_device.hpp): --emulate-layer-ms F[,B] and --emulate-only.
#pragma once

namespace CLI {
class App;
}

namespace hp::model {
struct EmulatedLayer;
}

namespace hp::cli {

// Adds the flags to `command`, writing into *emulate (which must outlive it).
// --emulate-layer-ms takes a layer's forward milliseconds and optionally its
// backward's (default twice the forward); --emulate-only needs it.
void add_emulate_flags(CLI::App* command, model::EmulatedLayer* emulate);

}  // namespace hp::cli
