#include "comm/send_queue.hpp"

#include <optional>
#include <string>

#include "comm/heartbeat.hpp"

namespace hp::comm {

SendQueue::SendQueue() : thread_([this] { loop(); }) {}

SendQueue::~SendQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SendQueue::rethrow_failure() {
  if (failure_) std::rethrow_exception(failure_);
}

void SendQueue::push(Work send) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    rethrow_failure();
    if (send.empty()) return;  // nothing to wait: no need to wake the thread
    queue_.push_back(std::move(send));
  }
  cv_.notify_all();
}

void SendQueue::drain() {
  // The owner thread waits here for its peers to take the sends: the
  // heartbeat shows that as a wait, not as a rank stuck in its own code.
  std::optional<detail::WaitNote> note;
  if (detail::WaitNote::wanted()) note.emplace([n = pending()] { return "its sends still in flight (" + std::to_string(n) + ")"; });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return failure_ || (queue_.empty() && waiting_ == 0); });
  rethrow_failure();
}

std::size_t SendQueue::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + waiting_;
}

void SendQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || (!queue_.empty() && !failure_); });
    if (stop_) return;
    Work send = std::move(queue_.front());
    queue_.pop_front();
    waiting_ = 1;
    lock.unlock();
    std::exception_ptr error;
    try {
      send.wait();
    } catch (...) {
      error = std::current_exception();
    }
    if (!error) send = Work();  // drops the tensor, outside the lock
    lock.lock();
    waiting_ = 0;
    if (error) {
      // Kept, not dropped: after a timeout the transport may still read them.
      failure_ = error;
      abandoned_.push_back(std::move(send));
      for (Work& w : queue_) abandoned_.push_back(std::move(w));
      queue_.clear();
    }
    cv_.notify_all();
  }
}

}  // namespace hp::comm
