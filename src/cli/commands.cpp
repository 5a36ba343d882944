#include "cli/commands.hpp"

#include <CLI/CLI.hpp>

#include "cli/launch_command.hpp"
#include "cli/plan_command.hpp"
#ifdef HYPERPIPE_WITH_TORCH
#include "cli/bench_command.hpp"
#include "cli/checkpoint_command.hpp"
#include "cli/generate_command.hpp"
#include "cli/train_command.hpp"
#endif

namespace hp::cli {

void add_commands(CLI::App& app, int* exit_code) {
  add_plan_command(app, exit_code);
#ifdef HYPERPIPE_WITH_TORCH
  add_train_command(app, exit_code);
  add_verify_command(app, exit_code);
  add_bench_command(app, exit_code);
  add_checkpoint_command(app, exit_code);
  add_generate_command(app, exit_code);
#endif
  add_launch_command(app, exit_code);
}

}  // namespace hp::cli
