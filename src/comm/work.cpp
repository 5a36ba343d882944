#include "comm/work.hpp"

#include <algorithm>
#include <exception>

namespace hp::comm {
namespace {

class ReadyWork final : public detail::WorkImpl {
 public:
  explicit ReadyWork(at::Tensor t) : t_(std::move(t)) {}
  void wait() override {}
  bool is_completed() override { return true; }
  at::Tensor tensor() const override { return t_; }

 private:
  at::Tensor t_;
};

class AllOfWork final : public detail::WorkImpl {
 public:
  AllOfWork(std::vector<Work> parts, at::Tensor result) : parts_(std::move(parts)), result_(std::move(result)) {}
  void wait() override {
    if (error_) std::rethrow_exception(error_);
    try {
      wait_all(parts_);
    } catch (...) {
      error_ = std::current_exception();
      throw;
    }
    done_ = true;
  }
  bool is_completed() override {
    return done_ || error_ || std::all_of(parts_.begin(), parts_.end(), [](Work& w) { return w.is_completed(); });
  }
  at::Tensor tensor() const override { return done_ ? result_ : at::Tensor(); }

 private:
  std::vector<Work> parts_;
  at::Tensor result_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace

Work Work::ready(at::Tensor result) { return Work(std::make_unique<ReadyWork>(std::move(result))); }

Work Work::all_of(std::vector<Work> parts, at::Tensor result) {
  return Work(std::make_unique<AllOfWork>(std::move(parts), std::move(result)));
}

void wait_all(std::vector<Work>& works) {
  for (Work& w : works) w.wait();
}

}  // namespace hp::comm
