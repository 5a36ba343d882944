// TOML configuration with the same names as the command-line flags.
//
// `--config FILE` (or --config=FILE) anywhere after the subcommand is replaced
// by the file's keys as flags, in file order: `mb = 8` -> `--mb 8`,
// `owner-backward = true` -> `--owner-backward` (false: omitted),
// `stage-cost = ["0:1:2", "1:1:2"]` -> `--stage-cost 0:1:2 --stage-cost 1:1:2`.
// Flags after --config override the file (the CLI takes the last value).
// Tables are not allowed: every key is a flag. An array is allowed only for a
// flag that takes several values, and no file names another (`config`).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace hp::cli {

// The command's flags, as the option schema registered them.
struct ConfigFlags {
  std::string command;                                      // "train", for messages
  std::function<bool(const std::string& flag)> accepts;     // "--mb": a flag of the command
  std::function<bool(const std::string& flag)> takes_many;  // "--stage-cost": takes several values
};

// Throws std::invalid_argument naming the file, the key and what is allowed.
std::vector<std::string> expand_config_files(const std::vector<std::string>& args, const ConfigFlags& flags);

}  // namespace hp::cli
