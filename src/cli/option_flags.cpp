#include "cli/option_flags.hpp"

#include <algorithm>

namespace hp::cli {
namespace {

FlagNames common(const std::string& pp_flag, const std::string& frozen_flag) {
  FlagNames f = {{"schedule.pp", pp_flag},
                 {"schedule.vpp", "--vpp"},
                 {"schedule.micro_batches", "--mb"},
                 {"schedule.group_size", "--group-size"},
                 {"schedule.layers", "--layers"},
                 {"schedule.kind", "--schedule"},
                 {"schedule.mpipe.transpose_layers", "--transpose-layers"},
                 {"schedule.mpipe.owner_backward", "--owner-backward"},
                 {"schedule.mpipe.overflow", "--overflow"},
                 {"schedule.mpipe.frozen_preprocess", frozen_flag}};
  // Longest names first, so no name is replaced inside a longer one.
  std::sort(f.begin(), f.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return f;
}

}  // namespace

std::string with_flags(std::string message, const FlagNames& flags) {
  for (const auto& [name, flag] : flags) {
    for (size_t at = message.find(name); at != std::string::npos; at = message.find(name, at + flag.size()))
      message.replace(at, name.size(), flag);
  }
  return message;
}

const FlagNames& plan_flags() {
  static const FlagNames f = common("--pp", "--frozen-preprocess");
  return f;
}

const FlagNames& job_flags() {
  static const FlagNames f = common("--nproc", "--freeze-vision");
  return f;
}

}  // namespace hp::cli
