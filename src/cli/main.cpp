// The hyperpipe binary: one subcommand per user task.
#include "cli/commands.hpp"

int main(int argc, char** argv) { return hp::cli::run_hyperpipe(argc, argv); }
