// `hyperpipe plan`: print, validate, simulate and draw a schedule. Uses only
// the schedule engine (no LibTorch, no process group).
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

// Registers the subcommand on app; the callback runs the plan and sets *exit_code.
void add_plan_command(CLI::App& app, int* exit_code);

}  // namespace hp::cli
