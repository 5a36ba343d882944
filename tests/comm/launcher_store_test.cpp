// The job's store as c10d sees it when node 0's launcher hosts it: c10d's
// operations under the start's prefix (two starts do not see each other's
// keys), get() waiting for a key set later, and a wait past its timeout
// failing with a message that says so.
#include <gtest/gtest.h>

#include <c10/util/Exception.h>

#include <thread>

#include "comm/launcher_store.hpp"
#include "launch/store_client.hpp"
#include "launch/store_server.hpp"

using hp::comm::LauncherStore;
using Ms = std::chrono::milliseconds;

namespace {

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(LauncherStore, ServesC10dsOperationsUnderItsStartsPrefix) {
  hp::launch::StoreServer server("127.0.0.2", 0);
  auto store = c10::make_intrusive<LauncherStore>("127.0.0.2", server.port(), "start/1/", Ms(5000));
  auto next = c10::make_intrusive<LauncherStore>("127.0.0.2", server.port(), "start/2/", Ms(5000));
  store->set("joined/0", bytes("1"));
  EXPECT_EQ(store->get("joined/0"), bytes("1"));
  EXPECT_TRUE(store->check({"joined/0"}));
  EXPECT_FALSE(next->check({"joined/0"})) << "another start's key";
  EXPECT_EQ(store->add("count", 2), 2);
  EXPECT_EQ(store->add("count", 3), 5);
  EXPECT_EQ(store->compareSet("cas", bytes(""), bytes("a")), bytes("a"));
  EXPECT_EQ(store->compareSet("cas", bytes("b"), bytes("c")), bytes("a"));
  EXPECT_TRUE(store->deleteKey("cas"));
  EXPECT_FALSE(store->deleteKey("cas"));
  hp::launch::StoreClient raw("127.0.0.2", server.port(), Ms(2000), Ms(2000));
  EXPECT_EQ(raw.get("start/1/joined/0").value_or(""), "1") << "keys live under the prefix";
  // clone() is a connection of its own to the same keys.
  auto other = store->clone();
  EXPECT_EQ(other->get("count"), bytes("5"));
}

TEST(LauncherStore, GetWaitsForALaterSetAndAWaitTimesOutSayingSo) {
  hp::launch::StoreServer server("127.0.0.2", 0);
  auto store = c10::make_intrusive<LauncherStore>("127.0.0.2", server.port(), "p/", Ms(20000));
  std::thread setter([&] {
    auto other = c10::make_intrusive<LauncherStore>("127.0.0.2", server.port(), "p/", Ms(5000));
    std::this_thread::sleep_for(Ms(100));
    other->set("late", bytes("v"));
  });
  EXPECT_EQ(store->get("late"), bytes("v"));
  setter.join();
  try {
    store->wait({"never"}, Ms(100));
    ADD_FAILURE() << "waited for a key nobody sets";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("timeout"), std::string::npos) << e.what();
  }
}

TEST(LauncherStore, NoLauncherToConnectToIsOneClearError) {
  try {
    LauncherStore("127.0.0.2", 1, "p/", Ms(200));
    ADD_FAILURE() << "connected to nothing";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("is node 0's launcher running, with the same launch.master_addr"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
