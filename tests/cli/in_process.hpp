// Runs `hyperpipe ARGS` inside the test process (hp::cli::run_hyperpipe, the
// binary's own main), for the many one-line refusals that come before any
// rank starts: no process to start and no LibTorch to load per case, which
// took the bad-input tests about a second a case. Standard output and error
// are captured at their file descriptors, so whatever the code under test
// prints, through iostreams or stdio, is seen. A case that passes its checks
// launches its ranks as the binary would (the hyperpipe binary as argv[0]).
//
// Contract: one call at a time, from the test's thread; ARGS is split into
// words as a shell would, with '...' and "..." quoting and no expansion.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "run_command.hpp"

namespace hp::testing {

inline std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\'' || c == '"') {
      const std::size_t end = line.find(c, i + 1);
      if (end == std::string::npos) throw std::invalid_argument("unbalanced quote in: " + line);
      word += line.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == ' ') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

inline CommandResult run_in_process(const std::string& args) {
  std::vector<std::string> words = shell_words(args);
  words.insert(words.begin(), hyperpipe());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  char path[] = "/tmp/hp_in_process_XXXXXX";
  const int out = ::mkstemp(path);
  if (out < 0) throw std::runtime_error("mkstemp failed");
  std::cout.flush(), std::cerr.flush(), std::fflush(nullptr);
  const int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(out, 1), ::dup2(out, 2);
  CommandResult r;
  r.exit_code = hp::cli::run_hyperpipe(static_cast<int>(words.size()), argv.data());
  std::cout.flush(), std::cerr.flush(), std::fflush(nullptr);
  ::dup2(saved_out, 1), ::dup2(saved_err, 2);
  ::close(saved_out), ::close(saved_err), ::close(out);
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  r.output = text.str();
  ::unlink(path);
  return r;
}

}  // namespace hp::testing
