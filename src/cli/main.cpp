// The hyperpipe binary: one subcommand per user task.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/plan_command.hpp"
#include "cli/self_args.hpp"
#ifdef HYPERPIPE_WITH_TORCH
#include "cli/torch_commands.hpp"
#endif

int main(int argc, char** argv) {
  hp::cli::set_self_args(argc, argv);
  CLI::App app{"hyperpipe: pipeline-parallel training on LibTorch"};
  app.require_subcommand(1);
  int exit_code = 0;
  hp::cli::add_plan_command(app, &exit_code);
#ifdef HYPERPIPE_WITH_TORCH
  hp::cli::add_torch_commands(app, &exit_code);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
