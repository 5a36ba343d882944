// SignalGuard: while a launch runs, SIGINT and SIGTERM are not the
// launcher's death but a request to stop the ranks. The handler only records
// the signal and writes a byte to a self-pipe: the launcher's one thread is
// blocked in poll() on the ranks' output, and the pipe's read end in that
// poll set wakes it at once instead of after the poll timeout.
//
// Contract: one guard at a time per process (the handler and the recorded
// signal are process-wide, like signal dispositions themselves); construct
// and destroy it on the launcher's thread. The previous dispositions are
// restored on destruction. With enable = false no handler is installed, but
// the pipe exists, so the poll loop is the same either way.
#pragma once

#include <signal.h>

namespace hp::launch {

class SignalGuard {
 public:
  explicit SignalGuard(bool enable);
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

  // The signal received since construction (the last one when several); 0: none.
  int received() const;
  // Readable (POLLIN) once a signal arrived; drain() empties it.
  int read_fd() const { return pipe_[0]; }
  void drain() const;

 private:
  bool enabled_;
  int pipe_[2] = {-1, -1};
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace hp::launch
