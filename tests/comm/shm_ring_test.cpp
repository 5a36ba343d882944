#include "comm/shm_ring.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace hp::comm {
namespace {

// A fresh ring file per test, removed after it.
struct RingFile {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("hp-shm-ring-test-" + std::to_string(::getpid()) + "-" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                         .string();
  RingFile() { std::filesystem::remove(path); }
  ~RingFile() { std::filesystem::remove(path); }
};

TEST(ShmRing, StreamsBytesInOrderAcrossTheWrapBetweenTwoMappings) {
  RingFile file;
  // The consumer opens first: a new file is an empty ring.
  auto in = ShmRing::open(file.path, 64, ShmRing::Side::Consumer);
  auto out = ShmRing::open(file.path, 64, ShmRing::Side::Producer);
  std::vector<std::uint8_t> sent(10007), got(sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<std::uint8_t>(i * 31 + 7);
  // Chunks of 7 against reads of 5 through 64 bytes: every split of a chunk at the wrap occurs.
  std::thread producer([&] {
    for (std::size_t at = 0; at < sent.size();) {
      const std::size_t n = out->write_some(sent.data() + at, std::min<std::size_t>(7, sent.size() - at));
      at += n;
      if (n == 0) out->wait_space(std::chrono::milliseconds(100));
    }
  });
  for (std::size_t at = 0; at < got.size();) {
    const std::size_t n = in->read_some(got.data() + at, std::min<std::size_t>(5, got.size() - at));
    at += n;
    if (n == 0) in->wait_data(std::chrono::milliseconds(100));
  }
  producer.join();
  EXPECT_EQ(got, sent);
  EXPECT_EQ(in->readable(), 0u);
}

TEST(ShmRing, AFullRingTakesNothingAndAnEmptyOneGivesNothing) {
  RingFile file;
  auto out = ShmRing::open(file.path, 16, ShmRing::Side::Producer);
  auto in = ShmRing::open(file.path, 16, ShmRing::Side::Consumer);
  const std::vector<std::uint8_t> head(10, 1), body(10, 2);
  EXPECT_EQ(out->write_some(head.data(), head.size(), body.data(), body.size()), 16u);  // the head whole, 6 of the body
  EXPECT_EQ(out->write_some(body.data(), body.size()), 0u);
  EXPECT_FALSE(out->wait_space(std::chrono::milliseconds(1)));
  std::vector<std::uint8_t> got(16);
  EXPECT_EQ(in->read_some(got.data(), 100), 16u);
  EXPECT_EQ(got, (std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}));
  EXPECT_EQ(in->read_some(got.data(), 1), 0u);
  EXPECT_FALSE(in->wait_data(std::chrono::milliseconds(1)));
  EXPECT_TRUE(out->wait_space(std::chrono::milliseconds(1)));
}

TEST(ShmRing, AFileThatCannotBeMadeIsOneErrorNamingIt) {
  try {
    ShmRing::open("/nonexistent-dir/ring", 64, ShmRing::Side::Producer);
    FAIL() << "opened a ring in a directory that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "shared-memory channel /nonexistent-dir/ring: open: No such file or directory");
  }
}

}  // namespace
}  // namespace hp::comm
