// `hyperpipe checkpoint ls DIR`: what a checkpoint holds, from its meta.json
// (no tensor is read): the step, the saving run's ranks, the model it was
// saved for and every parameter by global name with shape, dtype and shard.
#pragma once

namespace CLI {
class App;
}

namespace hp::cli {

void add_checkpoint_command(CLI::App& app, int* exit_code);

}  // namespace hp::cli
