// hyperpipe tokenize: text or JSON lines in, a Megatron indexed dataset out
// (data/tokenize.hpp), with progress on stderr and a summary line.
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

void add_tokenize_command(CLI::App& app, int* exit_code);

}  // namespace hp::cli
