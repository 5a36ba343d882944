// ShmRing: a one-way byte stream from one process to another on the same
// host, through a file both map (a file under /dev/shm: memory). The
// producer copies bytes in and the consumer copies them out; each side
// sleeps on a futex in the mapping when the ring is full or empty and is
// woken by the other. A message costs its copies and at most one wake-up,
// where Gloo's TCP transport costs a write, its I/O threads' wake-ups and a
// condition variable (docs/PERFORMANCE.md measures both).
//
// Contract:
// - One producer thread and one consumer thread (of two processes, or of
//   one in tests), each with its own ShmRing opened on the same path. Either
//   may open first: a new file is an empty ring, so nobody initialises it.
// - write_some()/read_some() never block; wait_space()/wait_data() sleep at
//   most `slice` and say whether the other side has moved meanwhile.
// - open() reserves the file's whole size up front, so a full /dev/shm is
//   an exception here, never a SIGBUS later.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace hp::comm {

class ShmRing {
 public:
  enum class Side { Producer, Consumer };

  // Throws std::runtime_error naming the path and the system's reason.
  static std::unique_ptr<ShmRing> open(const std::string& path, std::size_t capacity, Side side);
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  // Producer: copies what fits of `a` and then of `b` in, publishes it at
  // once (one wake-up of a sleeping consumer for a record's header and
  // body) and returns the bytes copied.
  std::size_t write_some(const void* a, std::size_t na, const void* b = nullptr, std::size_t nb = 0);
  // Consumer: copies up to n bytes out (what is there) into `out` (or drops
  // them when out is null), frees their room and wakes a sleeping producer.
  std::size_t read_some(void* out, std::size_t n);
  std::size_t readable() const;
  std::size_t writable() const;

  // Sleep until there is room / data, or `slice` passed. True when there is.
  bool wait_space(std::chrono::milliseconds slice);
  bool wait_data(std::chrono::milliseconds slice);

  std::size_t capacity() const { return capacity_; }

 private:
  struct Header;
  ShmRing(void* map, std::size_t map_bytes, std::size_t capacity);

  Header* header_;
  unsigned char* data_;
  std::size_t map_bytes_;
  std::size_t capacity_;
};

}  // namespace hp::comm
