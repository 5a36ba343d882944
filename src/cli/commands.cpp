#include "cli/commands.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

#include "cli/config_file.hpp"
#include "cli/self_args.hpp"

#include "cli/launch_command.hpp"
#include "cli/plan_command.hpp"
#include "cli/tokenize_command.hpp"
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
  add_tokenize_command(app, exit_code);
}

int run_hyperpipe(int argc, char** argv) {
  set_self_args(argc, argv);
  CLI::App app{"hyperpipe: pipeline-parallel training on LibTorch"};
  // A flag given twice (in a --config file and on the command line) takes the last value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  int exit_code = 0;
  add_commands(app, &exit_code);
  std::vector<std::string> args;
  try {
    // The subcommand's flags, as the option schema registered them.
    const std::string command = argc > 1 ? argv[1] : "";
    auto option = [&](const std::string& flag) -> const CLI::Option* {
      for (const CLI::App* sub : app.get_subcommands({}))
        if (sub->get_name() == command) return sub->get_option_no_throw(flag);
      return nullptr;
    };
    ConfigFlags flags;
    flags.command = command;
    flags.accepts = [&](const std::string& flag) { return option(flag) != nullptr; };
    flags.takes_many = [&](const std::string& flag) {
      const CLI::Option* o = option(flag);
      return o && o->get_items_expected_max() > 1;
    };
    args = expand_config_files({argv + 1, argv + argc}, flags);
  } catch (const std::exception& e) {
    std::cerr << "hyperpipe: error: " << e.what() << "\n";
    return 2;
  }
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes argument vectors in reverse order
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A bad flag or value is one line, as the commands' own refusals are.
    std::string who = "hyperpipe";
    for (const CLI::App* sub : app.get_subcommands({}))
      if (argc > 1 && sub->get_name() == argv[1]) who += " " + sub->get_name();
    std::cerr << who << ": error: " << e.what() << "\n";
    return 2;
  }
  return exit_code;
}

}  // namespace hp::cli
