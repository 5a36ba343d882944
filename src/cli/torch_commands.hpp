// The subcommands that need LibTorch: `train`, `launch`, `bench`.
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

void add_torch_commands(CLI::App& app, int* exit_code);

}  // namespace hp::cli
