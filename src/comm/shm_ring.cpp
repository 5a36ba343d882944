#include "comm/shm_ring.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace hp::comm {
namespace {

static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free,
              "the ring's counters are shared between processes: they must be address-free");

constexpr std::size_t kHeaderBytes = 4096;

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t seen, std::chrono::milliseconds slice) {
  timespec ts{static_cast<time_t>(slice.count() / 1000), static_cast<long>(slice.count() % 1000) * 1000000L};
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

}  // namespace

// Each side writes its own cache line only. Counters are totals of bytes
// since the ring was made, so full and empty differ without a spare slot.
struct ShmRing::Header {
  alignas(64) std::atomic<std::uint64_t> written;  // producer's
  std::atomic<std::uint32_t> data_seq;             // producer bumps after publishing; consumer sleeps on it
  std::atomic<std::uint32_t> producer_sleeping;
  alignas(64) std::atomic<std::uint64_t> read;  // consumer's
  std::atomic<std::uint32_t> space_seq;         // consumer bumps after freeing; producer sleeps on it
  std::atomic<std::uint32_t> consumer_sleeping;
};
std::unique_ptr<ShmRing> ShmRing::open(const std::string& path, std::size_t capacity, Side side) {
  const auto fail = [&](const char* what, int err) {
    throw std::runtime_error(std::string("shared-memory channel ") + path + ": " + what + ": " + std::strerror(err));
  };
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) fail("open", errno);
  const std::size_t bytes = kHeaderBytes + capacity;
  // Reserving the whole file makes a full /dev/shm fail here, not as a SIGBUS on a later copy.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    ::close(fd);
    fail("reserving its memory (is /dev/shm full?)", err);
  }
  // Every page is mapped now rather than faulted in by the first messages to
  // pass through it (a fault costs microseconds on a virtual machine, a
  // message of 16 KiB four of them): MAP_POPULATE maps them for reading,
  // and the producer, the only writer of the data, zeroes the data once for
  // writing before it publishes anything.
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED) fail("mmap", map_errno);
  if (side == Side::Producer) std::memset(static_cast<unsigned char*>(map) + kHeaderBytes, 0, capacity);
  return std::unique_ptr<ShmRing>(new ShmRing(map, bytes, capacity));
}

ShmRing::ShmRing(void* map, std::size_t map_bytes, std::size_t capacity)
    : header_(static_cast<Header*>(map)),
      data_(static_cast<unsigned char*>(map) + kHeaderBytes),
      map_bytes_(map_bytes),
      capacity_(capacity) {
  static_assert(sizeof(Header) <= kHeaderBytes);
}

ShmRing::~ShmRing() { ::munmap(header_, map_bytes_); }

std::size_t ShmRing::readable() const { return header_->written.load() - header_->read.load(); }
std::size_t ShmRing::writable() const { return capacity_ - readable(); }

std::size_t ShmRing::write_some(const void* a, std::size_t na, const void* b, std::size_t nb) {
  const std::uint64_t w = header_->written.load(std::memory_order_relaxed);
  const std::size_t room = capacity_ - static_cast<std::size_t>(w - header_->read.load());
  na = std::min(na, room);
  nb = std::min(nb, room - na);
  if (na + nb == 0) return 0;
  std::size_t at = w % capacity_;
  for (const auto& [from, n] : {std::pair{static_cast<const unsigned char*>(a), na}, std::pair{static_cast<const unsigned char*>(b), nb}}) {
    const std::size_t first = std::min(n, capacity_ - at);
    std::memcpy(data_ + at, from, first);
    std::memcpy(data_, from + first, n - first);
    at = (at + n) % capacity_;
  }
  header_->written.store(w + na + nb);
  header_->data_seq.fetch_add(1);
  if (header_->consumer_sleeping.load()) futex_wake(&header_->data_seq);
  return na + nb;
}

std::size_t ShmRing::read_some(void* out, std::size_t n) {
  const std::uint64_t r = header_->read.load(std::memory_order_relaxed);
  n = std::min(n, static_cast<std::size_t>(header_->written.load() - r));
  if (n == 0) return 0;
  if (out != nullptr) {
    const std::size_t at = r % capacity_, first = std::min(n, capacity_ - at);
    std::memcpy(out, data_ + at, first);
    std::memcpy(static_cast<unsigned char*>(out) + first, data_, n - first);
  }
  header_->read.store(r + n);
  header_->space_seq.fetch_add(1);
  if (header_->producer_sleeping.load()) futex_wake(&header_->space_seq);
  return n;
}

namespace {

// Sleeping: announce it, look again (the other side publishes, then reads the
// flag: one of the two sees the other), then sleep unless the word moved.
template <class Ready>
bool sleep_until(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleeping, Ready ready,
                 std::chrono::milliseconds slice) {
  const std::uint32_t seen = word.load();
  if (ready()) return true;
  sleeping.store(1);
  if (!ready()) futex_wait(&word, seen, slice);
  sleeping.store(0);
  return ready();
}

}  // namespace

bool ShmRing::wait_space(std::chrono::milliseconds slice) {
  return sleep_until(header_->space_seq, header_->producer_sleeping, [this] { return writable() > 0; }, slice);
}

bool ShmRing::wait_data(std::chrono::milliseconds slice) {
  return sleep_until(header_->data_seq, header_->consumer_sleeping, [this] { return readable() > 0; }, slice);
}

}  // namespace hp::comm
