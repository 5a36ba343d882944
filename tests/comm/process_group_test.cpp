// In-process tests of a one-rank group (the multi-rank behaviour is in
// p2p_dist_test.cpp, with real processes).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "comm/p2p.hpp"
#include "comm/process_group.hpp"

using namespace hp::comm;

namespace {

ProcessGroupOptions quick() {
  ProcessGroupOptions o;
  o.timeout = std::chrono::seconds(10);
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no invalid_argument>";
}

}  // namespace

TEST(ProcessGroup, SingleRankGroupListensForNobody) {
  ProcessGroup pg = ProcessGroup::create(DistEnv::single_process(), quick());
  EXPECT_EQ(pg.rank(), 0);
  EXPECT_EQ(pg.world_size(), 1);
  EXPECT_EQ(pg.store_port(), 0) << "a single process keeps its store in memory";
  EXPECT_EQ(pg.timeout(), std::chrono::seconds(10));

  at::Tensor x = at::arange(6, at::kDouble).reshape({2, 3});
  at::Tensor before = x.clone();
  pg.all_reduce(x);
  EXPECT_TRUE(at::equal(x, before));
  // A non-contiguous tensor goes through a staging copy and back.
  at::Tensor t = at::arange(12, at::kFloat).reshape({3, 4}).t();
  at::Tensor tb = t.clone();
  pg.all_reduce(t, ReduceOp::Max);
  EXPECT_TRUE(at::equal(t, tb));

  std::vector<at::Tensor> list = {at::ones({2}, at::kFloat), at::zeros({3, 2}, at::kLong).t(), at::ones({0})};
  pg.broadcast(list, 0);
  EXPECT_TRUE(at::equal(list[0], at::ones({2}, at::kFloat)));
  pg.barrier();
  EXPECT_EQ(pg.bytes_sent(), 0u);

  // Moving keeps the group usable.
  ProcessGroup moved = std::move(pg);
  moved.barrier();
}

TEST(ProcessGroup, MisuseIsInvalidArgumentNamingTheRank) {
  ProcessGroup pg = ProcessGroup::create(DistEnv::single_process(), quick());
  at::Tensor x = at::zeros({4});
  EXPECT_EQ(error_of([&] { pg.isend(x, 0, 1); }),
            "rank 0: send: peer rank 0 is this rank; a rank cannot send to itself");
  EXPECT_EQ(error_of([&] { pg.irecv(x, 3, 1); }), "rank 0: recv: peer rank 3 must be in [0, 1)");
  EXPECT_EQ(error_of([&] { pg.isend(at::Tensor(), 1, 1); }), "rank 0: send: the tensor is undefined");
  EXPECT_NE(error_of([&] { pg.isend(x.to_sparse(), 1, 1); }).find("only dense (strided) tensors"), std::string::npos);
  EXPECT_EQ(error_of([&] { pg.broadcast({x}, 1); }), "rank 0: broadcast: root rank 1 must be in [0, 1)");
  P2P p2p(pg);
  EXPECT_NE(error_of([&] { p2p.isend(x, 1, MessageKind::Activation, 5000, 0); }).find("stage 5000"), std::string::npos);
  EXPECT_NE(error_of([&] {
              p2p.batch_isend_irecv({P2POp::recv(at::Tensor(), 1, MessageKind::Gradient, 0, 0)});
            }).find("has no tensor"),
            std::string::npos);
}

TEST(ProcessGroup, InvalidOptionsAreRejectedBeforeConnecting) {
  DistEnv env = DistEnv::single_process();
  ProcessGroupOptions o = quick();
  o.timeout = std::chrono::milliseconds(0);
  EXPECT_THROW(ProcessGroup::create(env, o), std::invalid_argument);
  env.world_size = 2;  // port 0 with two ranks cannot work
  EXPECT_THROW(ProcessGroup::create(env, quick()), std::invalid_argument);
}

TEST(ProcessGroup, AClientWithoutItsStoreFailsWithinTheTimeout) {
  // Rank 1 of 2, but nobody hosts the store: the error names the store and
  // comes after about the timeout, not never.
  DistEnv env;
  env.rank = 1;
  env.world_size = 2;
  env.local_rank = 1;
  env.master_addr = "127.0.0.1";
  // A port that was just free; nobody listens on it.
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), len), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    env.master_port = ntohs(a.sin_port);
    ::close(fd);
  }
  ProcessGroupOptions o;
  o.timeout = std::chrono::milliseconds(1500);
  auto t0 = std::chrono::steady_clock::now();
  try {
    ProcessGroup::create(env, o);
    FAIL() << "no throw";
  } catch (const CommError& e) {
    std::string m = e.what();
    EXPECT_EQ(m.rfind("rank 1: connecting to the TCPStore at 127.0.0.1:" + std::to_string(env.master_port) +
                          " (hosted by rank 0) failed within 1.5 s: ",
                      0),
              0u)
        << m;
    EXPECT_NE(m.find("is rank 0 running"), std::string::npos) << m;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // A lower bound, which load only helps: the client keeps trying until the timeout.
  EXPECT_GE(s, 1.4) << "the client should keep trying until the timeout";
  // And the configured timeout is the one that ends it, not the default (300 s) it replaced; the
  // minute on top of it is room for a loaded machine, not a claim about speed.
  const double default_timeout_s = std::chrono::duration<double>(ProcessGroupOptions{}.timeout).count();
  ASSERT_GT(default_timeout_s, 1.5 + 60);
  EXPECT_LT(s, 1.5 + 60) << "the client waited past its own timeout of 1.5 s";
}

TEST(P2PMeta, EncodesAndDecodesShapes) {
  at::Tensor t = at::zeros({3, 0, 5}, at::kBFloat16);
  at::Tensor m = P2P::encode_meta(t);
  EXPECT_EQ(m.numel(), kMetaLength);
  P2P::Meta d = P2P::decode_meta(m);
  EXPECT_EQ(d.dtype, at::kBFloat16);
  EXPECT_EQ(d.sizes, (std::vector<std::int64_t>{3, 0, 5}));
  P2P::Meta s = P2P::decode_meta(P2P::encode_meta(at::scalar_tensor(1.5, at::kDouble)));
  EXPECT_EQ(s.dtype, at::kDouble);
  EXPECT_TRUE(s.sizes.empty());
  EXPECT_THROW(P2P::encode_meta(at::zeros(std::vector<int64_t>(9, 1))), std::invalid_argument);
  at::Tensor bad = P2P::encode_meta(t);
  bad[1] = 12;
  EXPECT_THROW(P2P::decode_meta(bad), std::invalid_argument);
  bad = P2P::encode_meta(t);
  bad[3] = -2;
  EXPECT_THROW(P2P::decode_meta(bad), std::invalid_argument);
  bad = P2P::encode_meta(t);
  bad[0] = 1000;
  EXPECT_THROW(P2P::decode_meta(bad), std::invalid_argument);
}
