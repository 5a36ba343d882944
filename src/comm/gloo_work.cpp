#include "comm/gloo_work.hpp"

#include <optional>
#include <string>

#include "comm/error_text.hpp"
#include "comm/heartbeat.hpp"

namespace hp::comm {

void GlooWork::wait() {
  if (done_) {
    if (error_) std::rethrow_exception(error_);
    return;
  }
  bool ok = false;
  std::string message;
  std::optional<detail::WaitNote> note;
  if (detail::WaitNote::wanted()) note.emplace([this] { return describe_in(*sh_, info_); });
  try {
    ok = work_->wait(sh_->timeout);
    if (!ok) message = "the operation was aborted";
  } catch (const std::exception& e) {
    message = clean_message(e);
  }
  done_ = true;
  if (!ok) {
    // keep_ stays alive: after a timeout the transport may still touch it.
    error_ = std::make_exception_ptr(make_error(*sh_, info_, message, looks_like_timeout(message)));
    std::rethrow_exception(error_);
  }
  if (on_success_) on_success_();
  if (count_ == Count::Sent) {
    sh_->bytes_sent += nbytes_;
    sh_->messages_sent += 1;
  } else if (count_ == Count::Received) {
    sh_->bytes_received += nbytes_;
    sh_->messages_received += 1;
  }
  keep_.clear();
  on_success_ = nullptr;
  work_.reset();
}

}  // namespace hp::comm
