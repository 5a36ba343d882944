#include "cli/self_args.hpp"

#include <unistd.h>

namespace hp::cli {
namespace {
std::vector<std::string>& storage() {
  static std::vector<std::string> args;
  return args;
}
}  // namespace

void set_self_args(int argc, char** argv) {
  auto& args = storage();
  args.assign(argv, argv + argc);
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0 && !args.empty()) args[0] = std::string(self, static_cast<size_t>(n));
}

const std::vector<std::string>& self_args() { return storage(); }

}  // namespace hp::cli
