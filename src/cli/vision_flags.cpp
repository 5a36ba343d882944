#include "cli/vision_flags.hpp"

#include <CLI/CLI.hpp>

#include "model/vision_config.hpp"

namespace hp::cli {

void add_vision_flags(CLI::App* command, model::VisionConfig* vision) {
  model::VisionConfig& v = *vision;
  command->add_option("--vision-layers", v.num_layers, "vl: vision tower blocks V (MPipe T counts these, 1..V)")
      ->capture_default_str();
  command->add_flag("--freeze-vision", v.frozen, "vl: the tower does not train (MPipe broadcasts it once)");
  command->add_option("--image-size", v.image_size, "vl: pixels per image side")->capture_default_str();
  command->add_option("--patch-size", v.patch_size, "vl: pixels per patch side")->capture_default_str();
  command->add_option("--vision-hidden", v.hidden_size, "vl: tower width")->capture_default_str();
  command->add_option("--vision-heads", v.num_attention_heads, "vl: tower attention heads")->capture_default_str();
}

}  // namespace hp::cli
