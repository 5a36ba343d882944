// `hyperpipe train`: the main job. Flags and TOML keys (--config) share names.
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

void add_train_command(CLI::App& app, int* exit_code);
// `hyperpipe verify`: train's flags; one step against one process.
void add_verify_command(CLI::App& app, int* exit_code);

}  // namespace hp::cli
