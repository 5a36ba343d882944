// The hyperpipe binary: one subcommand per user task.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

#include "cli/config_file.hpp"
#include "cli/launch_command.hpp"
#include "cli/plan_command.hpp"
#include "cli/self_args.hpp"
#ifdef HYPERPIPE_WITH_TORCH
#include "cli/bench_command.hpp"
#include "cli/checkpoint_command.hpp"
#include "cli/generate_command.hpp"
#include "cli/train_command.hpp"
#endif

int main(int argc, char** argv) {
  hp::cli::set_self_args(argc, argv);
  CLI::App app{"hyperpipe: pipeline-parallel training on LibTorch"};
  // A flag given twice (in a --config file and on the command line) takes the last value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  int exit_code = 0;
  hp::cli::add_plan_command(app, &exit_code);
#ifdef HYPERPIPE_WITH_TORCH
  hp::cli::add_train_command(app, &exit_code);
  hp::cli::add_verify_command(app, &exit_code);
  hp::cli::add_bench_command(app, &exit_code);
  hp::cli::add_checkpoint_command(app, &exit_code);
  hp::cli::add_generate_command(app, &exit_code);
#endif
  hp::cli::add_launch_command(app, &exit_code);
  std::vector<std::string> args;
  try {
    // Whether the subcommand's flag takes several values (a config array repeats it).
    const std::string command = argc > 1 ? argv[1] : "";
    auto takes_many = [&](const std::string& flag) {
      for (const CLI::App* sub : app.get_subcommands({}))
        if (sub->get_name() == command)
          if (const CLI::Option* opt = sub->get_option_no_throw(flag)) return opt->get_items_expected_max() > 1;
      return false;
    };
    args = hp::cli::expand_config_files({argv + 1, argv + argc}, takes_many);
  } catch (const std::exception& e) {
    std::cerr << "hyperpipe: error: " << e.what() << "\n";
    return 2;
  }
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes argument vectors in reverse order
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
