#include "comm/send_queue.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace hp::comm {
namespace {

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
  GatedSend(Gate* gate, at::Tensor t) : gate_(gate), t_(std::move(t)) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(gate_->mu);
    gate_->cv.wait(lock, [this] { return gate_->open; });
    if (gate_->fail) throw std::runtime_error("send to rank 2 failed");
  }
  bool is_completed() override { return false; }

 private:
  Gate* gate_;
  at::Tensor t_;
};

template <class Pred>
bool eventually(Pred p) {
  for (int i = 0; i < 2000; ++i) {
    if (p()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(SendQueue, DropsEachSendAsSoonAsItCompletesInPushOrder) {
  Gate first, second;
  const at::Tensor a = at::zeros({4}), b = at::zeros({4});
  SendQueue q;
  q.push(Work(std::make_unique<GatedSend>(&first, a)));
  q.push(Work(std::make_unique<GatedSend>(&second, b)));
  EXPECT_EQ(q.pending(), 2u);
  EXPECT_EQ(a.use_count(), 2);
  second.release();  // done, but waited after the first
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(q.pending(), 2u);
  first.release();
  EXPECT_TRUE(eventually([&] { return q.pending() == 0; }));
  EXPECT_EQ(a.use_count(), 1);  // the queue let go of the tensors before the drain
  EXPECT_EQ(b.use_count(), 1);
  q.drain();
}

TEST(SendQueue, DrainWaitsForEverySend) {
  Gate gate;
  SendQueue q;
  q.push(Work(std::make_unique<GatedSend>(&gate, at::zeros({1}))));
  auto drained = std::async(std::launch::async, [&] { q.drain(); });
  EXPECT_EQ(drained.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  gate.release();
  drained.get();
  EXPECT_EQ(q.pending(), 0u);
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
