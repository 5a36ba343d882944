// Shared helpers for the model tests (header-only, no LibTorch).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace hp::model::testing {

// Expects fn to throw std::invalid_argument whose message contains every needle.
inline void expect_invalid(const std::function<void()>& fn,
                           std::initializer_list<std::string> needles) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    for (const auto& n : needles) {
      EXPECT_NE(what.find(n), std::string::npos) << "message \"" << what << "\" lacks \"" << n << "\"";
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected std::invalid_argument, got another exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected std::invalid_argument, nothing was thrown";
}

}  // namespace hp::model::testing
