#include "cli/launch_command.hpp"

#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/option_schema.hpp"
#include "launch/launcher.hpp"

namespace hp::cli {

void add_launch_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("launch", "Start N local ranks of a command with the torchrun environment set");
  auto opts = std::make_shared<launch::LaunchOptions>();
  opts->nproc = 2;
  OptionRoots roots;
  roots.launch = opts.get();
  add_schema_options(cmd, kLaunch, roots);
  cmd->add_option("command", opts->command, "the command each rank runs (after --)")->required();
  cmd->callback([opts, exit_code] {
    try {
      *exit_code = launch::launch_local(*opts);
    } catch (const std::exception& e) {
      std::cerr << "hyperpipe launch: error: " << with_flags(e.what(), schema_flags(kLaunch)) << "\n";
      *exit_code = 2;
    }
  });
}

}  // namespace hp::cli
