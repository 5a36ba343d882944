#include "train/checkpoint_error.hpp"

#include <c10/util/Exception.h>

#include <stdexcept>

namespace hp::train {

[[noreturn]] void bad_save(const std::string& dir, const std::string& what) {
  throw std::invalid_argument(cat("train.save ", dir, ": ", what));
}
[[noreturn]] void bad_load(const std::string& path, const std::string& what) {
  throw std::invalid_argument(cat("train.load ", path, ": ", what));
}

std::string first_line(const std::exception& e) {
  std::string s = e.what();
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) s = c10e->what_without_backtrace();
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace hp::train
