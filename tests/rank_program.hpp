// What the rank programs of the dist tests (tests/*/*_worker.cpp) share: a
// check that throws, one line per event on stdout, the group options of a
// test job, and a main body whose failure is one line "rank R: FAILED:
// <message>" on stderr and exit status 1 (what the tests match).
#pragma once

#include <c10/util/Exception.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

#include "comm/process_group.hpp"

namespace hp::testing {

inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

inline void say(int rank, const std::string& s) {
  std::printf("rank %d: %s\n", rank, s.c_str());
  std::fflush(stdout);
}

// The group's timeout: HP_TIMEOUT_S seconds, 20 unless set.
inline comm::ProcessGroupOptions rank_group_options() {
  comm::ProcessGroupOptions opts;
  const char* t = std::getenv("HP_TIMEOUT_S");
  opts.timeout = std::chrono::milliseconds(static_cast<long>(1000 * (t ? std::atof(t) : 20.0)));
  return opts;
}

// body(&rank) sets the rank as soon as it knows it and returns the exit status.
inline int run_rank(const std::function<int(int* rank)>& body) {
  int rank = -1;
  auto failed = [&rank](const char* what) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, what);
    std::fflush(stderr);
    return 1;
  };
  try {
    return body(&rank);
  } catch (const c10::Error& e) {
    return failed(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return failed(e.what());
  }
}

}  // namespace hp::testing
