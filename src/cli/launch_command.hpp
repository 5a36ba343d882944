// `hyperpipe launch --nproc N -- COMMAND...`: N local ranks of any program,
// with the torchrun environment set (launch/launcher.hpp). Needs no LibTorch.
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

// Registers the subcommand on app; the callback runs the job and sets *exit_code
// to its status (2 for bad options).
void add_launch_command(CLI::App& app, int* exit_code);

}  // namespace hp::cli
