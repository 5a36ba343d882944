// The command line this process was started with, so `train --nproc N` can
// start N ranks of exactly the same command.
#pragma once

#include <string>
#include <vector>

namespace hp::cli {

void set_self_args(int argc, char** argv);
// argv with argv[0] replaced by the path of this executable (/proc/self/exe).
const std::vector<std::string>& self_args();

}  // namespace hp::cli
