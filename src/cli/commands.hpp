// Every subcommand of the hyperpipe binary, on one CLI11 app: main.cpp parses
// with it, and tests walk it against the option schema.
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

// Adds plan, train, verify, bench, checkpoint, generate and launch (those a
// build without LibTorch has: plan and launch). A command's callback writes
// its exit status to *exit_code, which must outlive the app.
void add_commands(CLI::App& app, int* exit_code);

// The hyperpipe binary's main: parses argv (expanding --config files) and
// runs the subcommand. A program that registers model families of its own
// (family/model_family.hpp) and then calls this is hyperpipe with them.
int run_hyperpipe(int argc, char** argv);

}  // namespace hp::cli
