// Heartbeat: this rank's liveness and position, published in the job's store,
// so that a rank whose operation failed or timed out can name the peer that
// died or stopped, not just the neighbour it was talking to (which may only
// have failed because of that peer), and say where every rank was.
//
// Position: what the rank is doing, noted in memory by the layers that know it
// (the trainer's step, the executor's action, and every wait of the rank's
// main thread on a Work or on its send queue, noted by comm itself) and
// published with each beat.
// Noting costs a lock and a string copy, never a store round trip.
//
// Contract:
// - At most one Heartbeat per process, made by the rank's main thread after
//   its job group exists; that thread is the one whose waits are noted.
// - A background thread beats every `interval` on its own store connection
//   (c10d's store client is not shared across threads). The destructor stops
//   it without waiting for a beat stuck on a store that no longer answers.
// - report_failure() and diagnose() are bounded: a store that does not answer
//   (rank 0, which hosts it, died or stopped) is reported, never waited for.
//   diagnose() takes about three intervals: a peer is "not responding" when its
//   beat did not advance in that time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace hp::comm {

class ProcessGroup;

// Position notes (process-wide; no-ops while no Heartbeat exists, which
// positions_noted() tells before a caller builds a note). A note's text is
// made only when a beat publishes it (on the heartbeat's thread, under the
// board's lock, about once an interval), not when it is noted: notes sit on
// every action's and every message wait's path, where formatting text cost
// more than a small message's transfer.
using NoteText = std::function<std::string()>;
bool positions_noted();
void note_step(std::int64_t step);
// `what` must not refer to anything that dies before the next note_step or
// note_action (capture by value).
void note_action(int index, int count, NoteText what);

namespace detail {
// Marks the owner thread as waiting for `what` (peer named by its global
// rank) for the object's lifetime; `what` may refer to anything that outlives
// the object. Other threads' waits are not noted.
class WaitNote {
 public:
  // Whether this thread's waits are noted (a Heartbeat exists and this is its owner).
  static bool wanted();
  explicit WaitNote(NoteText what);
  ~WaitNote();
  WaitNote(const WaitNote&) = delete;
  WaitNote& operator=(const WaitNote&) = delete;

 private:
  bool noted_ = false;
};
}  // namespace detail

struct HeartbeatOptions {
  std::chrono::milliseconds interval{1000};
};

class Heartbeat {
 public:
  explicit Heartbeat(const ProcessGroup& job, HeartbeatOptions options = {});
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Publishes that this rank failed with `error` (a peer surveying the job
  // then knows it did not just vanish) and stops beating.
  void report_failure(const std::string& error);

  // Surveys every rank and returns lines (each starting "rank R: ") that name
  // the ranks not responding, the first failure, the longest-waiting receive
  // and the peer it waits for, and a table of every rank's position.
  std::string diagnose();

  // The rank the last diagnose() blames: the first not responding, else the
  // first stuck (never this rank); nullopt when it found none.
  struct Culprit {
    int rank = -1;
    std::string state;  // "is not responding (dead or stopped)", "is alive but stuck"
  };
  std::optional<Culprit> culprit() const;

  // For rank 0, which hosts the store, after its own failure: returns once
  // every other rank has finished its own survey, stopped beating or got stuck
  // (or after `limit`), so that the peers still surveying can read the store.
  void wait_for_peers(std::chrono::milliseconds limit);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hp::comm
