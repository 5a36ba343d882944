#include "comm/send_queue.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace hp::comm {
namespace {

// What the queue's thread did with the sends, in order: "wait X" when it starts waiting send X,
// "done X" when that wait returns, "drop X" once X and its tensor are released. The tests wait
// for these events, never for a time: a loaded machine only delays them.
class Log {
 public:
  void add(const std::string& event) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(event);
    }
    cv_.notify_all();
  }
  // Waits until `event` is logged. The limit is a bound on a hang only.
  bool wait_for(const std::string& event) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(120),
                        [&] { return std::find(events_.begin(), events_.end(), event) != events_.end(); });
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

// A send that completes when the test opens its gate, holding a tensor until then.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool fail = false;
  void release(bool failure = false) {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
      fail = failure;
    }
    cv.notify_all();
  }
};

class GatedSend final : public detail::WorkImpl {
 public:
  GatedSend(Gate* gate, at::Tensor t, std::string name = "", Log* log = nullptr)
      : gate_(gate), t_(std::move(t)), name_(std::move(name)), log_(log) {}
  ~GatedSend() override {
    t_ = at::Tensor();  // before "drop" is logged: a test reads the tensor's use count on it
    note("drop");
  }
  void wait() override {
    note("wait");
    {
      std::unique_lock<std::mutex> lock(gate_->mu);
      gate_->cv.wait(lock, [this] { return gate_->open; });
      if (gate_->fail) throw std::runtime_error("send to rank 2 failed");
    }
    note("done");
  }
  bool is_completed() override { return false; }

 private:
  void note(const char* what) {
    if (log_ != nullptr) log_->add(std::string(what) + " " + name_);
  }
  Gate* gate_;
  at::Tensor t_;
  std::string name_;
  Log* log_;
};

// Opens the gates when it goes out of scope, declared after the queue: a test that stops at a
// failed ASSERT does not leave the queue's destructor joining a thread blocked on a closed gate.
struct OpenOnExit {
  std::vector<Gate*> gates;
  ~OpenOnExit() {
    for (Gate* g : gates) g->release();
  }
};

// Whether thread `tid` of this process sleeps (state S: blocked on a lock, a condition, I/O).
bool sleeping(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'S';
}

// Polls `p` until it holds. The limit is a bound on a hang only.
template <class Pred>
bool eventually(Pred p) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!p()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

using Events = std::vector<std::string>;

TEST(SendQueue, DropsEachSendAsSoonAsItCompletesInPushOrder) {
  Log log;  // outlives the queue, which may log drops as it goes
  Gate head, first, second;
  const at::Tensor a = at::zeros({4}), b = at::zeros({4});
  SendQueue q;
  const OpenOnExit open_on_exit{{&head, &first, &second}};
  // The queue's thread waits on `head` while the two sends under test are pushed, so which of
  // them it takes next is the queue's choice, not a race with the pushes.
  q.push(Work(std::make_unique<GatedSend>(&head, at::zeros({1}), "head", &log)));
  ASSERT_TRUE(log.wait_for("wait head"));
  q.push(Work(std::make_unique<GatedSend>(&first, a, "first", &log)));
  q.push(Work(std::make_unique<GatedSend>(&second, b, "second", &log)));
  EXPECT_EQ(q.pending(), 3u);
  EXPECT_EQ(a.use_count(), 2);
  second.release();  // done, but waited after the first
  head.release();
  // The thread drops `head`, then must wait on `first` and leave `second`, complete as it is,
  // queued with its tensor: it is blocked there until `first` opens.
  ASSERT_TRUE(log.wait_for("wait first")) << ::testing::PrintToString(log.events());
  ASSERT_EQ(log.events(), (Events{"wait head", "done head", "drop head", "wait first"}));
  EXPECT_EQ(q.pending(), 2u);
  EXPECT_EQ(b.use_count(), 2);
  first.release();
  ASSERT_TRUE(log.wait_for("drop second")) << ::testing::PrintToString(log.events());
  EXPECT_EQ(log.events(), (Events{"wait head", "done head", "drop head", "wait first", "done first", "drop first",
                                  "wait second", "done second", "drop second"}));
  EXPECT_EQ(a.use_count(), 1);  // the queue let go of the tensors before the drain
  EXPECT_EQ(b.use_count(), 1);
  q.drain();
  EXPECT_EQ(q.pending(), 0u);
}

TEST(SendQueue, DrainWaitsForEverySend) {
  Log log;
  Gate gate;
  SendQueue q;
  const OpenOnExit open_on_exit{{&gate}};
  q.push(Work(std::make_unique<GatedSend>(&gate, at::zeros({1}), "send", &log)));
  // Taken off the queue by its thread: only the thread's count of the send in flight remains.
  ASSERT_TRUE(log.wait_for("wait send"));
  std::atomic<pid_t> drainer{0};
  auto drained = std::async(std::launch::async, [&] {
    drainer = static_cast<pid_t>(::syscall(SYS_gettid));
    q.drain();
  });
  const OpenOnExit lets_drain_return{{&gate}};  // destroyed before `drained`, which waits for drain()
  // Either drain() returned or its thread went to sleep in it (nothing else in that thread
  // blocks): a point it provably reached, where returning would already have shown.
  ASSERT_TRUE(eventually([&] {
    return drained.wait_for(std::chrono::seconds(0)) == std::future_status::ready ||
           (drainer != 0 && sleeping(drainer));
  }));
  EXPECT_EQ(drained.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "drain() returned before the send completed";
  gate.release();
  drained.get();
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_EQ(log.events(), (Events{"wait send", "done send", "drop send"}));
}

TEST(SendQueue, TheFirstFailureIsRethrownByDrainAndPush) {
  Gate bad, never;
  SendQueue q;
  q.push(Work(std::make_unique<GatedSend>(&bad, at::zeros({1}))));
  q.push(Work(std::make_unique<GatedSend>(&never, at::zeros({1}))));
  bad.release(/*failure=*/true);
  try {
    q.drain();
    ADD_FAILURE() << "drain() returned after a failed send";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "send to rank 2 failed");
  }
  EXPECT_EQ(q.pending(), 0u);  // the send after it is abandoned, not waited
  EXPECT_THROW(q.push(Work()), std::runtime_error);
  EXPECT_THROW(q.drain(), std::runtime_error);
}

}  // namespace
}  // namespace hp::comm
