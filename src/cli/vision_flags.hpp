// The vision tower's flags shared by train and bench (--model vl;
// model/vision_config.hpp): --vision-layers, --freeze-vision, --image-size,
// --patch-size, --vision-hidden, --vision-heads.
#pragma once

namespace CLI {
class App;
}

namespace hp::model {
struct VisionConfig;
}

namespace hp::cli {

// Adds the flags to `command`, writing into *vision (which must outlive it).
void add_vision_flags(CLI::App* command, model::VisionConfig* vision);

}  // namespace hp::cli
