#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "comm/dist_env.hpp"

using hp::comm::DistEnv;

namespace {

using Vars = std::map<std::string, std::string>;

Vars good() {
  return {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
}

DistEnv parse(const Vars& v) {
  return DistEnv::parse([&](const std::string& k) -> std::optional<std::string> {
    auto it = v.find(k);
    if (it == v.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(const Vars& v) {
  try {
    parse(v);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no error>";
}

Vars with(Vars v, const std::string& k, const std::string& val) {
  v[k] = val;
  return v;
}

Vars without(Vars v, const std::string& k) {
  v.erase(k);
  return v;
}

}  // namespace

TEST(DistEnv, ParsesTorchrunVariables) {
  DistEnv e = parse(good());
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.to_string(), "rank 2/4 (local 0) master 10.0.0.1:29500");
  EXPECT_EQ(parse(with(good(), "RANK", " 3 ")).rank, 3);
  EXPECT_EQ(e.store_path, "");
}

TEST(DistEnv, TakesTheLocalLaunchersStoreFile) {
  DistEnv e = parse(with(good(), "HYPERPIPE_STORE_PATH", "/tmp/hyperpipe-store-x/store"));
  EXPECT_EQ(e.store_path, "/tmp/hyperpipe-store-x/store");
  EXPECT_EQ(e.to_string(), "rank 2/4 (local 0) master 10.0.0.1:29500 store /tmp/hyperpipe-store-x/store");
  EXPECT_EQ(error_of(with(good(), "HYPERPIPE_STORE_PATH", "store")),
            "HYPERPIPE_STORE_PATH=store must be an absolute file path (the job's store file), or not set");
}

TEST(DistEnv, TakesANodeLaunchersStore) {
  DistEnv e = parse(with(good(), "HYPERPIPE_LAUNCHER_STORE", "start/2/"));
  EXPECT_TRUE(e.launcher_store);
  EXPECT_EQ(e.launcher_store_prefix, "start/2/");
  EXPECT_FALSE(e.rank0_hosts_store());
  EXPECT_TRUE(parse(good()).rank0_hosts_store());
  EXPECT_EQ(e.to_string(), "rank 2/4 (local 0) master 10.0.0.1:29500 store hosted by node 0's launcher");
  EXPECT_EQ(error_of(with(with(good(), "HYPERPIPE_LAUNCHER_STORE", "p/"), "HYPERPIPE_STORE_PATH", "/tmp/s")),
            "HYPERPIPE_LAUNCHER_STORE and HYPERPIPE_STORE_PATH are both set; a job has one store");
}

TEST(DistEnv, TakesTheLaunchersSharedMemoryDirectoryForItsNodesRanks) {
  const DistEnv env = parse(with(with(good(), "HYPERPIPE_SHM_DIR", "/dev/shm/hyperpipe-shm-x"), "LOCAL_WORLD_SIZE", "2"));
  EXPECT_EQ(env.shm_dir, "/dev/shm/hyperpipe-shm-x");
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(parse(good()).shm_dir, "");
  EXPECT_EQ(error_of(with(good(), "HYPERPIPE_SHM_DIR", "/dev/shm/x")),
            "HYPERPIPE_SHM_DIR is set but LOCAL_WORLD_SIZE is not: the ranks it serves are RANK - LOCAL_RANK and the "
            "LOCAL_WORLD_SIZE - 1 after it");
  EXPECT_EQ(error_of(with(with(good(), "HYPERPIPE_SHM_DIR", "shm"), "LOCAL_WORLD_SIZE", "2")),
            "HYPERPIPE_SHM_DIR=shm must be an absolute directory path, or not set");
  EXPECT_EQ(error_of(with(with(good(), "HYPERPIPE_SHM_DIR", "/dev/shm/x"), "LOCAL_WORLD_SIZE", "3")),
            "LOCAL_WORLD_SIZE=3 must exceed LOCAL_RANK=0 and fit in WORLD_SIZE=4 after RANK - LOCAL_RANK");
}

TEST(DistEnv, ReportsNonIntegers) {
  EXPECT_EQ(error_of(with(good(), "RANK", "abc")), "RANK=abc is not an integer");
  EXPECT_EQ(error_of(with(good(), "WORLD_SIZE", "4x")), "WORLD_SIZE=4x is not an integer");
  EXPECT_EQ(error_of(with(good(), "MASTER_PORT", "")), "MASTER_PORT= is not an integer");
  EXPECT_EQ(error_of(with(good(), "LOCAL_RANK", "1.5")), "LOCAL_RANK=1.5 is not an integer");
  EXPECT_EQ(error_of(with(good(), "RANK", "99999999999")), "RANK=99999999999 is out of range");
}

TEST(DistEnv, ReportsOutOfRangeValues) {
  EXPECT_EQ(error_of(with(good(), "RANK", "4")), "RANK=4 must be in [0, WORLD_SIZE=4)");
  EXPECT_EQ(error_of(with(good(), "RANK", "-1")), "RANK=-1 must be in [0, WORLD_SIZE=4)");
  EXPECT_EQ(error_of(with(good(), "WORLD_SIZE", "0")), "WORLD_SIZE=0 must be at least 1");
  EXPECT_EQ(error_of(with(good(), "LOCAL_RANK", "7")), "LOCAL_RANK=7 must be in [0, WORLD_SIZE=4)");
  EXPECT_EQ(error_of(with(good(), "MASTER_PORT", "70000")), "MASTER_PORT=70000 must be in [1, 65535]");
  EXPECT_NE(error_of(with(good(), "MASTER_PORT", "0")).find("only valid with WORLD_SIZE=1"), std::string::npos);
  EXPECT_NE(error_of(with(good(), "MASTER_ADDR", " ")).find("MASTER_ADDR is empty"), std::string::npos);
  // Port 0 is fine for a single process.
  Vars one = {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "0"}};
  EXPECT_EQ(parse(one).master_port, 0);
}

TEST(DistEnv, ReportsMissingVariables) {
  for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) {
    std::string e = error_of(without(good(), k));
    EXPECT_EQ(e.rfind(std::string(k) + " is not set", 0), 0u) << e;
  }
}

TEST(DistEnv, ReadsTheProcessEnvironment) {
  for (auto& [k, v] : good()) ::setenv(k.c_str(), v.c_str(), 1);
  EXPECT_TRUE(hp::comm::has_environment());
  DistEnv e = DistEnv::from_environment();
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.master_port, 29500);
  ::unsetenv("MASTER_PORT");
  try {
    DistEnv::from_environment();
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& ex) {
    EXPECT_NE(std::string(ex.what()).find("MASTER_PORT is not set"), std::string::npos);
  }
  ::unsetenv("RANK");
  EXPECT_TRUE(hp::comm::has_environment());  // WORLD_SIZE alone still says "launched"
  for (auto& [k, v] : good()) ::unsetenv(k.c_str());
  EXPECT_FALSE(hp::comm::has_environment());
}
