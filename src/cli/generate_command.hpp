// `hyperpipe generate`: decode from a checkpoint saved under any layout,
// through a forward-only pipeline of --nproc ranks (infer/decoder.hpp).
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

void add_generate_command(CLI::App& app, int* exit_code);

}  // namespace hp::cli
