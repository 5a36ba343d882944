// SendQueue: posted sends, waited on a background thread in posting order, so
// that each send's Work, and with it the tensor storage it keeps alive, is
// dropped as soon as the transport is done with it rather than at the end of
// the step. Gloo reports a send complete only inside wait() (work.hpp), so a
// completion test between actions cannot do this; a waiting thread can.
//
// Contract:
// - push() and drain() are called from the thread that owns the group; the
//   queue's thread only waits and drops Work objects (Gloo's wait is safe from
//   any thread).
// - Sends are waited one at a time in push order: a later send that completes
//   first is dropped once the earlier ones have been.
// - drain() returns when every pushed send has completed. It rethrows the
//   first failure (the CommError of that send's wait); the sends after it are
//   abandoned, as wait_all() does, and every later drain() or push() rethrows
//   it too.
// - The destructor stops the thread once the wait in progress returns (for a
//   failed job at most the group's timeout) and abandons the rest.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "comm/work.hpp"

namespace hp::comm {

class SendQueue {
 public:
  SendQueue();
  ~SendQueue();
  SendQueue(const SendQueue&) = delete;
  SendQueue& operator=(const SendQueue&) = delete;

  void push(Work send);
  void drain();
  // Sends pushed and not yet completed (the one being waited included).
  std::size_t pending();

 private:
  void loop();
  void rethrow_failure();  // with mu_ held

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Work> queue_;
  std::deque<Work> abandoned_;  // the failed send and those after it
  std::size_t waiting_ = 0;  // 1 while the thread waits a send taken off the queue
  std::exception_ptr failure_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hp::comm
