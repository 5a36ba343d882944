// Lower layers name the options they check by their place in the options
// structs ("schedule.pp", "schedule.mpipe.transpose_layers"), since they do
// not know which command a user ran; each command maps those names to its own
// flags before printing (`train` has no --pp: its ranks are --nproc), with the
// pairs the option schema gives it (option_schema.hpp, schema_flags).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.hpp"

namespace hp::cli {

// (option name, the command's flag) pairs.
using FlagNames = std::vector<std::pair<std::string, std::string>>;

// `message` with every option name replaced by its flag. `flags` must hold
// the longest names first (longest_first), so no name is replaced inside a
// longer one.
std::string with_flags(std::string message, const FlagNames& flags);
void longest_first(FlagNames& flags);

// --overflow full|min|auto (plan, train and bench) as a mode. The option's
// rule (option_schema.cpp) has refused any other value; std::logic_error here.
schedule::Overflow overflow_from_flag(const std::string& value);
// --layers-per-stage 3,1,2,2 (train and bench); throws std::invalid_argument
// naming the flag on a bad list.
std::vector<int> layer_counts_from_flag(const std::string& text);
// --mpipe-body (plan and train) as a schedule kind; as overflow_from_flag.
schedule::ScheduleKind mpipe_body_from_flag(const std::string& value);
// plan and train: --mpipe-body and --overflow into o.mpipe, then, unless --vpp
// was given, o.vpp to the default of o's schedule (which the body decides).
void apply_mpipe_flags(const std::string& mpipe_body, const std::string& overflow, bool vpp_given,
                       schedule::ScheduleOptions& o);

}  // namespace hp::cli
