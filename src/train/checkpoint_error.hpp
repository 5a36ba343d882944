// How checkpoint operations fail: in one line that a user can act on, which
// starts with what was asked and where ("train.save DIR: ", "train.load
// PATH: "), so that a message read in a rank's log names the directory
// without the call stack that led there. Bad arguments and unreadable or
// damaged checkpoints are std::invalid_argument (the user's to fix); failed
// writes are std::runtime_error (the machine's), which try_save_checkpoint
// turns into a failed save rather than a failed job.
//
// Contract: pure functions; shared by the checkpoint's files (checkpoint.cpp,
// checkpoint_dir.cpp, checkpoint_meta.cpp, durable_file.cpp) only.
#pragma once

#include <exception>
#include <sstream>
#include <string>

namespace hp::train {

// The parts written one after another, as operator<< writes them.
template <typename... Ts>
std::string cat(const Ts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// Throw std::invalid_argument "train.save DIR: what" / "train.load PATH: what".
[[noreturn]] void bad_save(const std::string& dir, const std::string& what);
[[noreturn]] void bad_load(const std::string& path, const std::string& what);

// A LibTorch error's first line, without the C++ stack trace it carries.
std::string first_line(const std::exception& e);

}  // namespace hp::train
