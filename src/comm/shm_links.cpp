#include "comm/shm_links.hpp"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "comm/group_state.hpp"
#include "comm/heartbeat.hpp"
#include "comm/shm_ring.hpp"

namespace hp::comm {
namespace {

using Clock = std::chrono::steady_clock;
// How long a side sleeps before it looks whether its peer is gone.
constexpr std::chrono::milliseconds kSlice{100};
// looks_like_peer_gone() recognises it, as it does Gloo's closed sockets.
constexpr const char* kPeerGone = "the connection was closed by peer (its process is gone)";

}  // namespace

// The links' own types (named: the channels below hold them).
namespace shm_wire {

struct Record {
  std::int64_t tag;
  std::uint64_t bytes;
};

// A rank's process, from the pid file its job group wrote (shm_pid_path);
// unknown until that file exists.
class Peer {
 public:
  explicit Peer(std::string pid_file) : pid_file_(std::move(pid_file)) {}
  bool gone() {
    if (pid_ <= 0) std::ifstream(pid_file_) >> pid_;
    return pid_ > 0 && ::kill(pid_, 0) != 0 && errno == ESRCH;
  }

 private:
  std::string pid_file_;
  pid_t pid_ = 0;
};

struct PendingSend {
  OpInfo info;
  at::Tensor payload;
  Record record;
  std::size_t sent = 0;  // of the record's header and body
  bool done = false;
  std::exception_ptr error;
};

}  // namespace shm_wire

using shm_wire::PendingSend;
using shm_wire::Peer;
using shm_wire::Record;

std::string shm_pid_path(const std::string& dir, int global_rank) { return dir + "/" + std::to_string(global_rank) + ".pid"; }

// The sending side of one ring: what did not fit at once waits in `queue`,
// streamed by `thread` as the receiver frees room.
struct ShmLinks::Out {
  Shared* sh;
  std::unique_ptr<ShmRing> ring;
  Peer peer;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::shared_ptr<PendingSend>> queue;
  std::exception_ptr failure;  // a broken channel fails every later send
  bool stop = false;
  std::thread thread;

  Out(Shared* s, std::unique_ptr<ShmRing> r, std::string pid_file) : sh(s), ring(std::move(r)), peer(std::move(pid_file)) {}

  // Stops the thread and fails what it had not sent.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
    std::lock_guard<std::mutex> lock(mu);
    if (!queue.empty()) fail(make_error(*sh, queue.front()->info, "the group was closed before the send completed", false));
  }

  // With mu held: copies what fits; true when the whole record is in.
  bool advance(PendingSend& op) {
    const std::size_t total = sizeof(Record) + op.record.bytes;
    while (op.sent < total) {
      const auto* head = reinterpret_cast<const unsigned char*>(&op.record);
      const auto* body = static_cast<const unsigned char*>(op.payload.data_ptr());
      const std::size_t in_head = op.sent < sizeof(Record) ? sizeof(Record) - op.sent : 0;
      const std::size_t body_at = op.sent + in_head - sizeof(Record);
      const std::size_t n = ring->write_some(head + (sizeof(Record) - in_head), in_head, body + body_at, op.record.bytes - body_at);
      if (n == 0) return false;
      op.sent += n;
    }
    op.done = true;
    op.payload = at::Tensor();
    sh->bytes_sent += op.record.bytes;
    sh->messages_sent += 1;
    return true;
  }

  void fail(const CommError& e) {
    failure = std::make_exception_ptr(e);
    for (auto& op : queue) op->error = failure;
    queue.clear();
    cv.notify_all();
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    auto progress = Clock::now();
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (stop) return;
      const std::shared_ptr<PendingSend> op = queue.front();  // its Work may be dropped once it is done
      const std::size_t before = op->sent;
      if (advance(*op)) {
        queue.pop_front();
        cv.notify_all();
      }
      if (op->sent != before) progress = Clock::now();
      if (queue.empty()) continue;
      lock.unlock();
      const bool room = ring->wait_space(kSlice);
      const bool gone = !room && peer.gone();
      lock.lock();
      if (queue.empty() || room) continue;
      if (gone) fail(make_error(*sh, queue.front()->info, kPeerGone, false));
      else if (Clock::now() - progress > sh->timeout) fail(make_error(*sh, queue.front()->info, "", true));
    }
  }
};

// The receiving side of one ring: the record being read, and the records
// read for tags not yet waited.
struct ShmLinks::In {
  Shared* sh;
  std::unique_ptr<ShmRing> ring;
  Peer peer;
  std::mutex mu;  // held by the one thread receiving
  std::map<std::int64_t, std::deque<std::vector<unsigned char>>> stash;
  Record record{};
  std::size_t have_head = 0, have_body = 0;
  bool direct = false;  // the body goes straight into the receive waiting for it
  std::vector<unsigned char> body;
  std::exception_ptr failure;

  In(Shared* s, std::unique_ptr<ShmRing> r, std::string pid_file) : sh(s), ring(std::move(r)), peer(std::move(pid_file)) {}

  void sleep_or_fail(const OpInfo& info, Clock::time_point deadline) {
    if (ring->wait_data(kSlice)) return;
    if (peer.gone() && ring->readable() == 0) throw make_error(*sh, info, kPeerGone, false);
    if (Clock::now() > deadline) throw make_error(*sh, info, "", true);
  }

  // Reads records until the one for `info.tag` is in `into` (nbytes).
  void receive(const OpInfo& info, unsigned char* into, std::size_t nbytes) {
    const auto deadline = Clock::now() + sh->timeout;
    for (;;) {
      if (have_head == 0) {
        auto it = stash.find(info.tag);
        if (it != stash.end() && !it->second.empty()) {
          std::vector<unsigned char> got = std::move(it->second.front());
          it->second.pop_front();
          if (got.size() != nbytes)
            throw make_error(*sh, info,
                             "the message has " + std::to_string(got.size()) + " bytes, the receive expects " +
                                 std::to_string(nbytes),
                             false);
          std::memcpy(into, got.data(), nbytes);
          return;
        }
      }
      if (have_head < sizeof(Record)) {
        have_head += ring->read_some(reinterpret_cast<unsigned char*>(&record) + have_head, sizeof(Record) - have_head);
        if (have_head < sizeof(Record)) {
          sleep_or_fail(info, deadline);
          continue;
        }
        direct = record.tag == info.tag && record.bytes == nbytes;  // the stash has none of this tag (above)
        if (!direct) body.resize(record.bytes);
        have_body = 0;
      }
      have_body += ring->read_some((direct ? into : body.data()) + have_body, record.bytes - have_body);
      if (have_body < record.bytes) {
        sleep_or_fail(info, deadline);
        continue;
      }
      have_head = 0;
      if (direct) return;
      stash[record.tag].push_back(std::move(body));
      body = {};
    }
  }
};

namespace {

class ShmSendWork final : public detail::WorkImpl {
 public:
  ShmSendWork(std::shared_ptr<Shared> sh, std::shared_ptr<ShmLinks::Out> out, std::shared_ptr<PendingSend> op)
      : sh_(std::move(sh)), out_(std::move(out)), op_(std::move(op)) {}
  void wait() override {
    std::optional<detail::WaitNote> note;
    if (detail::WaitNote::wanted()) note.emplace([this] { return describe_in(*sh_, op_->info); });
    std::unique_lock<std::mutex> lock(out_->mu);
    out_->cv.wait(lock, [&] { return op_->done || op_->error; });
    if (op_->error) std::rethrow_exception(op_->error);
  }
  bool is_completed() override {
    std::lock_guard<std::mutex> lock(out_->mu);
    return op_->done || op_->error;
  }

 private:
  std::shared_ptr<Shared> sh_;
  std::shared_ptr<ShmLinks::Out> out_;
  std::shared_ptr<PendingSend> op_;
};

class ShmRecvWork final : public detail::WorkImpl {
 public:
  ShmRecvWork(std::shared_ptr<Shared> sh, std::shared_ptr<ShmLinks::In> in, OpInfo info, at::Tensor buffer,
              std::function<void()> copy_back, at::Tensor result)
      : sh_(std::move(sh)), in_(std::move(in)), info_(std::move(info)), buffer_(std::move(buffer)),
        copy_back_(std::move(copy_back)), result_(std::move(result)) {}
  void wait() override {
    if (done_) {
      if (error_) std::rethrow_exception(error_);
      return;
    }
    std::optional<detail::WaitNote> note;
    if (detail::WaitNote::wanted()) note.emplace([this] { return describe_in(*sh_, info_); });
    std::unique_lock<std::mutex> lock(in_->mu);
    done_ = true;
    try {
      if (in_->failure) std::rethrow_exception(in_->failure);
      in_->receive(info_, static_cast<unsigned char*>(buffer_.data_ptr()), buffer_.nbytes());
    } catch (...) {
      // A record left half read would be misplaced by the next receive: the channel is broken.
      error_ = in_->failure = std::current_exception();
      throw;
    }
    if (copy_back_) copy_back_();
    sh_->bytes_received += buffer_.nbytes();
    sh_->messages_received += 1;
  }
  bool is_completed() override { return done_; }
  at::Tensor tensor() const override { return done_ && !error_ ? result_ : at::Tensor(); }

 private:
  std::shared_ptr<Shared> sh_;
  std::shared_ptr<ShmLinks::In> in_;
  OpInfo info_;
  at::Tensor buffer_;
  std::function<void()> copy_back_;
  at::Tensor result_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace

ShmLinks::ShmLinks(std::string dir, std::string group, int first_local, int local_count, std::size_t ring_bytes)
    : dir_(std::move(dir)), group_(std::move(group)), first_local_(first_local), local_count_(local_count), ring_bytes_(ring_bytes) {}

ShmLinks::~ShmLinks() {
  for (auto& [peer, out] : out_) out->close();
}

bool ShmLinks::reaches(const Shared& sh, int peer) const {
  const int g = global_of(sh, peer), me = global_of(sh, sh.env.rank);
  return g != me && g >= first_local_ && g < first_local_ + local_count_;
}

std::string ShmLinks::path(const Shared& sh, int src, int dst) const {
  return dir_ + "/" + group_ + "." + std::to_string(global_of(sh, src)) + "-" + std::to_string(global_of(sh, dst));
}

Work ShmLinks::send(const std::shared_ptr<Shared>& sh, OpInfo info, at::Tensor payload) {
  std::shared_ptr<Out> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = out_[info.peer];
    if (!slot)
      slot = std::make_shared<Out>(sh.get(), ShmRing::open(path(*sh, sh->env.rank, info.peer), ring_bytes_, ShmRing::Side::Producer),
                                   shm_pid_path(dir_, global_of(*sh, info.peer)));
    out = slot;
  }
  auto op = std::make_shared<PendingSend>();
  op->record = {info.tag, static_cast<std::uint64_t>(payload.nbytes())};
  op->info = std::move(info);
  op->payload = std::move(payload);
  std::lock_guard<std::mutex> lock(out->mu);
  if (out->failure) std::rethrow_exception(out->failure);
  if (out->queue.empty() && out->advance(*op)) return Work();
  out->queue.push_back(op);
  if (!out->thread.joinable()) out->thread = std::thread([o = out.get()] { o->loop(); });
  out->cv.notify_all();
  return Work(std::make_unique<ShmSendWork>(sh, out, std::move(op)));
}

Work ShmLinks::recv(const std::shared_ptr<Shared>& sh, OpInfo info, at::Tensor buffer, std::function<void()> copy_back,
                    at::Tensor result) {
  std::shared_ptr<In> in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = in_[info.peer];
    if (!slot)
      slot = std::make_shared<In>(sh.get(), ShmRing::open(path(*sh, info.peer, sh->env.rank), ring_bytes_, ShmRing::Side::Consumer),
                                  shm_pid_path(dir_, global_of(*sh, info.peer)));
    in = slot;
  }
  return Work(std::make_unique<ShmRecvWork>(sh, std::move(in), std::move(info), std::move(buffer), std::move(copy_back),
                                            std::move(result)));
}

}  // namespace hp::comm
