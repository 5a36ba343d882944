#include "cli/emulate_flags.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <sstream>
#include <string>

#include "model/transformer_config.hpp"

namespace hp::cli {

void add_emulate_flags(CLI::App* command, model::EmulatedLayer* emulate) {
  auto* ms = command->add_option_function<std::string>(
      "--emulate-layer-ms",
      [emulate](const std::string& spec) {
        std::istringstream in(spec);
        std::string f, b;
        std::getline(in, f, ',');
        const bool has_b = static_cast<bool>(std::getline(in, b));
        auto number = [&](const std::string& text) {
          try {
            std::size_t used = 0;
            const double v = std::stod(text, &used);
            if (used == text.size() && std::isfinite(v) && v >= 0 && v <= 60000) return v;
          } catch (const std::exception&) {
          }
          throw CLI::ValidationError("--emulate-layer-ms", "'" + spec +
                                                               "': expected F or F,B, each layer's forward and "
                                                               "backward milliseconds in [0, 60000]");
        };
        emulate->forward_ms = number(f);
        emulate->backward_ms = has_b ? number(b) : 2 * emulate->forward_ms;
      },
      "emulated devices: every layer also sleeps F ms forward and B ms backward (default 2F)");
  command->add_flag("--emulate-only", emulate->replace_math,
                    "emulated devices: a layer is its --emulate-layer-ms delay alone (no math, no parameters)")
      ->needs(ms);
}

}  // namespace hp::cli
