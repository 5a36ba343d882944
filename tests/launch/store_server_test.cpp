// The launcher-hosted store: c10d's store operations over hyperpipe's wire,
// waits that wake on a set and time out, wills that fire when a connection
// is lost (not after goodbye), and a server that listens on its address
// alone (127.0.0.2 here, so 127.0.0.3 finds nothing at the same port).
#include <gtest/gtest.h>

#include <thread>

#include "launch/launcher.hpp"
#include "launch/store_client.hpp"
#include "launch/store_server.hpp"
#include "launch/store_wire.hpp"

using namespace hp::launch;
using Ms = std::chrono::milliseconds;

namespace {

std::unique_ptr<StoreClient> client_of(const StoreServer& s, const std::string& host = "127.0.0.2") {
  return std::make_unique<StoreClient>(host, s.port(), Ms(2000), Ms(5000));
}

TEST(StoreWire, FramesRoundTripAndAPartialFrameWaits) {
  const std::string f = store_wire::encode(7, {"key", "", std::string("a\0b", 3)});
  store_wire::Frame out;
  EXPECT_EQ(store_wire::decode(f.substr(0, f.size() - 1), out), 0u);
  EXPECT_EQ(store_wire::decode(f + "next", out), f.size());
  EXPECT_EQ(out.code, 7);
  ASSERT_EQ(out.parts.size(), 3u);
  EXPECT_EQ(out.parts[2], std::string("a\0b", 3));
  std::string huge = store_wire::encode(1, {});
  huge[1] = huge[2] = huge[3] = huge[4] = '\xff';  // 4 G parts
  EXPECT_THROW(store_wire::decode(huge, out), std::runtime_error);
}

TEST(StoreServer, AnswersTheStoreOperations) {
  StoreServer server("127.0.0.2", 0);
  auto c = client_of(server);
  c->set("a", "1");
  EXPECT_EQ(c->get("a").value_or(""), "1");
  EXPECT_FALSE(c->get("b").has_value());
  EXPECT_EQ(c->add("n", 3), 3);
  EXPECT_EQ(c->add("n", -1), 2);
  EXPECT_EQ(c->add("a", 1), 2);  // "1" is a number
  auto c2 = client_of(server);
  c2->set("word", "w");
  EXPECT_THROW(c2->add("word", 1), StoreError);
  auto c3 = client_of(server);
  EXPECT_EQ(c3->compare_set("cas", "", "first"), "first");
  EXPECT_EQ(c3->compare_set("cas", "wrong", "second"), "first");
  EXPECT_EQ(c3->compare_set("cas", "first", "second"), "second");
  EXPECT_EQ(c3->compare_set("none", "x", "y"), "x");
  EXPECT_FALSE(c3->check({"none"}));
  EXPECT_TRUE(c3->check({"cas", "n"}));
  EXPECT_FALSE(c3->check({"cas", "nothing"}));
  EXPECT_TRUE(c3->remove("cas"));
  EXPECT_FALSE(c3->remove("cas"));
  EXPECT_EQ(c3->num_keys(), 3);  // a, n, word
}

TEST(StoreServer, AWaitWakesOnASetAndTimesOutOtherwise) {
  StoreServer server("127.0.0.2", 0);
  auto waiter = client_of(server);
  auto setter = client_of(server);
  EXPECT_FALSE(waiter->wait({"k"}, Ms(100)));
  std::thread t([&] {
    std::this_thread::sleep_for(Ms(100));
    setter->set("k", "v");
    setter->set("k2", "v");
  });
  EXPECT_TRUE(waiter->wait({"k", "k2"}, Ms(20000)));
  t.join();
  EXPECT_TRUE(waiter->wait({"k"}, Ms(1)));  // already there
  // The connection still works after a timed-out wait.
  EXPECT_EQ(waiter->get("k").value_or(""), "v");
}

TEST(StoreServer, AWillTakesEffectWhenItsConnectionIsLostButNotAfterGoodbye) {
  StoreServer server("127.0.0.2", 0);
  auto watcher = client_of(server);
  {
    auto lost = client_of(server);
    lost->will("gone/1", "node 1 is gone");
    lost->will("taken", "not this");
    watcher->set("taken", "kept");
    EXPECT_EQ(server.connections(), 2);
  }  // closed without goodbye, as a kill -9 closes it
  EXPECT_TRUE(watcher->wait({"gone/1"}, Ms(20000)));
  EXPECT_EQ(watcher->get("gone/1").value_or(""), "node 1 is gone");
  EXPECT_EQ(watcher->get("taken").value_or(""), "kept");
  {
    auto polite = client_of(server);
    polite->will("gone/2", "node 2 is gone");
    polite->goodbye();
  }
  EXPECT_FALSE(watcher->wait({"gone/2"}, Ms(300)));
}

TEST(StoreServer, ListensOnItsAddressAloneAndClientsSayWhenItIsGone) {
  auto server = std::make_unique<StoreServer>("127.0.0.2", 0);
  const int port = server->port();
  EXPECT_THROW(StoreClient("127.0.0.3", port, Ms(200), Ms(1000)), StoreError);
  EXPECT_THROW(StoreClient("127.0.0.1", port, Ms(200), Ms(1000)), StoreError);
  try {
    StoreServer again("127.0.0.2", port);
    ADD_FAILURE() << "a second server on the same address and port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the store cannot listen on 127.0.0.2:" + std::to_string(port)),
              std::string::npos)
        << e.what();
  }
  auto c = client_of(*server);
  c->set("k", "v");
  server.reset();
  try {
    c->get("k");
    ADD_FAILURE() << "a get from a store that is gone";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("the connection was closed"), std::string::npos) << e.what();
    EXPECT_FALSE(e.timed_out());
  }
}

TEST(StoreClient, WaitsForAServerThatStartsLater) {
  const int port = pick_free_port("127.0.0.2");
  std::unique_ptr<StoreServer> server;
  std::thread t([&] {
    std::this_thread::sleep_for(Ms(300));
    server = std::make_unique<StoreServer>("127.0.0.2", port);
  });
  StoreClient c("127.0.0.2", port, Ms(20000), Ms(5000));
  t.join();
  c.set("k", "v");
  EXPECT_EQ(c.get("k").value_or(""), "v");
}

}  // namespace
