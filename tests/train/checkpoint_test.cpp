#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <unistd.h>

#include "train/adamw.hpp"
#include "train/checkpoint.hpp"

namespace hp::train {
namespace {

namespace fs = std::filesystem;

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("hp_ckpt_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  fs::path dir_;
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A distinct value per name and a version v, so loads can be checked exactly.
at::Tensor value(const std::string& name, std::vector<std::int64_t> shape, double v,
                 at::ScalarType dtype = at::kDouble) {
  const double base = static_cast<double>(std::hash<std::string>{}(name) % 1000) / 7.0;
  std::int64_t numel = 1;
  for (auto d : shape) numel *= d;
  return (at::arange(numel, at::kDouble).reshape(shape) + base + v).to(dtype).requires_grad_(true);
}

// Global names of a small 4-layer GPT and the shape of each.
std::map<std::string, std::vector<std::int64_t>> model_shapes() {
  std::map<std::string, std::vector<std::int64_t>> s;
  s["embedding.word_embeddings.weight"] = {8, 4};
  for (int l = 0; l < 4; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    s[p + "attn_norm.weight"] = {4};
    s[p + "attention.qkv.weight"] = {12, 4};
    s[p + "mlp.fc1.weight"] = {16, 4};
    s[p + "mlp.fc1.bias"] = {16};
  }
  s["final_norm.weight"] = {4};
  return s;
}

NamedParams params_where(double v, const std::function<bool(const std::string&)>& keep) {
  NamedParams p;
  for (const auto& [n, shape] : model_shapes())
    if (keep(n)) p[n] = value(n, shape, v);
  return p;
}
bool first_half(const std::string& n) {
  return n.rfind("embedding.", 0) == 0 || n.rfind("layers.0.", 0) == 0 || n.rfind("layers.1.", 0) == 0;
}
bool second_half(const std::string& n) { return !first_half(n); }
bool everything(const std::string&) { return true; }

// Runs two AdamW steps with fixed grads, so the state is non-trivial.
AdamWState trained_state(NamedParams& p) {
  for (auto& [n, t] : p) t.mutable_grad() = at::ones_like(t) * 0.25;
  AdamW opt(p);
  opt.step(1e-2);
  opt.step(1e-2);
  return opt.state();
}

NamedParams zeros_like_all(const NamedParams& p) {
  NamedParams z;
  for (const auto& [n, t] : p) z[n] = at::zeros_like(t).requires_grad_(true);
  return z;
}

void expect_message(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one containing: " << needle;
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(Checkpoint, RoundTripSingleRank) {
  NamedParams p = params_where(1.0, everything);
  const AdamWState st = trained_state(p);
  int barriers = 0;
  save_checkpoint(dir(), 7, 0, 1, p, st, R"({"config":{"layers":4},"note":"x"})", [&] { ++barriers; });
  EXPECT_EQ(barriers, 2);
  EXPECT_EQ(read_file(dir_ / "latest"), "step-7\n");
  EXPECT_TRUE(fs::exists(dir_ / "step-7" / "meta.json"));
  EXPECT_TRUE(fs::exists(dir_ / "step-7" / "rank-0.pt"));
  EXPECT_FALSE(fs::exists(dir_ / "step-7.tmp"));

  NamedParams fresh = zeros_like_all(p);
  AdamW opt(fresh);
  const LoadedCheckpoint c = restore_checkpoint(dir(), fresh, &opt);
  EXPECT_EQ(c.step, 7);
  EXPECT_EQ(c.world_size, 1);
  EXPECT_EQ(c.path, (dir_ / "step-7").string());
  EXPECT_EQ(nlohmann::json::parse(c.metadata_json), nlohmann::json::parse(R"({"config":{"layers":4},"note":"x"})"));
  for (const auto& [n, t] : p) EXPECT_TRUE(at::equal(fresh.at(n), t)) << n;
  EXPECT_EQ(opt.step_count(), 2);
  ASSERT_EQ(opt.state().params.size(), p.size());
  for (const auto& [n, s] : st.params) {
    const auto& got = opt.state().params.at(n);
    EXPECT_EQ(got.step, s.step);
    EXPECT_TRUE(at::equal(got.exp_avg, s.exp_avg)) << n;
    EXPECT_TRUE(at::equal(got.exp_avg_sq, s.exp_avg_sq)) << n;
  }
  // The same checkpoint by its explicit step directory.
  EXPECT_EQ(load_checkpoint((dir_ / "step-7").string(), fresh).step, 7);
  EXPECT_EQ(latest_checkpoint(dir()), (dir_ / "step-7").string());
}

TEST_F(Checkpoint, TwoShardsLoadIntoOneProcessAndOtherLayouts) {
  NamedParams r0 = params_where(1.0, first_half);
  NamedParams r1 = params_where(1.0, second_half);
  // The tied embedding copy on the last stage, with a different value: the lowest rank wins.
  r1["embedding.word_embeddings.weight"] = value("embedding.word_embeddings.weight", {8, 4}, 99.0);
  const AdamWState s0 = trained_state(r0);
  const AdamWState s1 = trained_state(r1);
  auto noop = [] {};
  // With a no-op barrier rank 1 goes first, so rank 0's finalize sees both shards.
  save_checkpoint(dir(), 3, 1, 2, r1, s1, "", noop);
  EXPECT_FALSE(fs::exists(dir_ / "latest"));
  save_checkpoint(dir(), 3, 0, 2, r0, s0, "", noop);

  const auto meta = nlohmann::json::parse(read_file(dir_ / "step-3" / "meta.json"));
  EXPECT_EQ(meta.at("world_size"), 2);
  EXPECT_EQ(meta.at("shards"), nlohmann::json::array({"rank-0.pt", "rank-1.pt"}));
  EXPECT_EQ(meta.at("params").size(), model_shapes().size());
  EXPECT_EQ(meta.at("params").at("layers.3.mlp.fc1.weight").at("shard"), 1);
  EXPECT_EQ(meta.at("params").at("embedding.word_embeddings.weight").at("shard"), 0);
  EXPECT_TRUE(meta.at("metadata").is_null());

  // PP=1: one process holds every name.
  NamedParams all = zeros_like_all(params_where(0.0, everything));
  AdamW opt(all);
  const auto c = restore_checkpoint(dir(), all, &opt);
  EXPECT_EQ(c.metadata_json, "");
  for (const auto& [n, t] : all) {
    const NamedParams& src = first_half(n) ? r0 : r1;
    const AdamWState& sst = first_half(n) ? s0 : s1;
    EXPECT_TRUE(at::equal(t, src.at(n))) << n;
    EXPECT_TRUE(at::equal(opt.state().params.at(n).exp_avg, sst.params.at(n).exp_avg)) << n;
  }
  // PP=3-like subset: only layers 1 and 2, which come from different shards.
  NamedParams mid = zeros_like_all(params_where(0.0, [](const std::string& n) {
    return n.rfind("layers.1.", 0) == 0 || n.rfind("layers.2.", 0) == 0;
  }));
  const auto m = load_checkpoint(dir(), mid);
  EXPECT_EQ(m.params.size(), mid.size());
  EXPECT_EQ(m.optimizer.params.size(), mid.size());
  EXPECT_TRUE(at::equal(m.params.at("layers.2.mlp.fc1.bias"), r1.at("layers.2.mlp.fc1.bias")));
}

TEST_F(Checkpoint, WriteShardThenFinalizeAndMissingShard) {
  NamedParams r0 = params_where(1.0, first_half);
  NamedParams r1 = params_where(1.0, second_half);
  write_checkpoint_shard(dir(), 4, 0, 2, r0, {});
  // Rank 1's shard is missing: finalize refuses, and nothing becomes visible.
  expect_message([&] { finalize_checkpoint(dir(), 4, 2, ""); }, "shard 1 of 2 is missing");
  EXPECT_FALSE(fs::exists(dir_ / "latest"));
  EXPECT_FALSE(latest_checkpoint(dir()).has_value());
  write_checkpoint_shard(dir(), 4, 1, 2, r1, {});
  finalize_checkpoint(dir(), 4, 2, R"([1,2,3])");
  const auto c = load_checkpoint(dir(), params_where(0.0, everything));
  EXPECT_EQ(c.step, 4);
  EXPECT_EQ(c.metadata_json, "[1,2,3]");
  EXPECT_TRUE(c.optimizer.params.empty());  // saved without optimizer state
}

TEST_F(Checkpoint, KilledSaveNeverWins) {
  NamedParams p = params_where(1.0, everything);
  save_checkpoint(dir(), 1, 0, 1, p, {}, "", nullptr);
  // Save of step 2 killed after both shards were written, before finalize.
  NamedParams p2 = params_where(2.0, everything);
  write_checkpoint_shard(dir(), 2, 0, 2, params_where(2.0, first_half), {});
  write_checkpoint_shard(dir(), 2, 1, 2, params_where(2.0, second_half), {});
  // ... and even killed after meta.json was written into the .tmp dir, before the rename.
  std::ofstream(dir_ / "step-2.tmp" / "meta.json") << R"({"format":"hyperpipe-checkpoint","version":1})";
  // A partial shard and a half-written latest.tmp of the killed run.
  std::ofstream(dir_ / "step-2.tmp" / "rank-0.pt.tmp") << "garbage";
  std::ofstream(dir_ / "latest.tmp") << "step-2";

  NamedParams fresh = zeros_like_all(p);
  const auto c = load_checkpoint(dir(), fresh);
  EXPECT_EQ(c.step, 1);
  for (const auto& [n, t] : c.params) EXPECT_TRUE(at::equal(t, p.at(n))) << n;
  expect_message([&] { load_checkpoint((dir_ / "step-2.tmp").string(), fresh); }, "unfinished");

  // The next save cleans the stale directory.
  save_checkpoint(dir(), 3, 0, 1, p2, {}, "", nullptr);
  EXPECT_FALSE(fs::exists(dir_ / "step-2.tmp"));
  EXPECT_TRUE(fs::exists(dir_ / "step-1"));
  EXPECT_EQ(read_file(dir_ / "latest"), "step-3\n");
  const auto c3 = load_checkpoint(dir(), fresh);
  EXPECT_EQ(c3.step, 3);
  for (const auto& [n, t] : c3.params) EXPECT_TRUE(at::equal(t, p2.at(n))) << n;
}

TEST_F(Checkpoint, StaleShardsOfAnEarlierAttemptAreDropped) {
  // An attempt with 3 ranks was killed; the retry runs with 2.
  write_checkpoint_shard(dir(), 5, 2, 3, params_where(9.0, everything), {});
  write_checkpoint_shard(dir(), 5, 0, 2, params_where(1.0, first_half), {});
  write_checkpoint_shard(dir(), 5, 1, 2, params_where(1.0, second_half), {});
  finalize_checkpoint(dir(), 5, 2, "");
  EXPECT_FALSE(fs::exists(dir_ / "step-5" / "rank-2.pt"));
  const auto c = load_checkpoint(dir(), params_where(0.0, everything));
  EXPECT_TRUE(at::equal(c.params.at("final_norm.weight"), value("final_norm.weight", {4}, 1.0)));
}

TEST_F(Checkpoint, ResavingTheSameStepReplacesIt) {
  save_checkpoint(dir(), 5, 0, 1, params_where(1.0, everything), {}, R"({"v":1})", nullptr);
  NamedParams b = params_where(2.0, everything);
  save_checkpoint(dir(), 5, 0, 1, b, {}, R"({"v":2})", nullptr);
  const auto c = load_checkpoint(dir(), zeros_like_all(b));
  EXPECT_EQ(nlohmann::json::parse(c.metadata_json).at("v"), 2);
  for (const auto& [n, t] : c.params) EXPECT_TRUE(at::equal(t, b.at(n))) << n;
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-5"}));
}

TEST_F(Checkpoint, ConvertsToTheNeededDtype) {
  NamedParams f{{"layers.0.w", value("layers.0.w", {3}, 1.0, at::kFloat)}};
  save_checkpoint(dir(), 0, 0, 1, f, {}, "", nullptr);
  const auto c = load_checkpoint(dir(), {{"layers.0.w", at::zeros({3}, at::kDouble)}});
  EXPECT_EQ(c.params.at("layers.0.w").scalar_type(), at::kDouble);
  EXPECT_TRUE(at::equal(c.params.at("layers.0.w"), f.at("layers.0.w").to(at::kDouble)));
}

TEST_F(Checkpoint, LoadErrorsNameTheProblem) {
  NamedParams eight;
  for (int l = 0; l < 8; ++l) eight["layers." + std::to_string(l) + ".mlp.fc1.weight"] = at::zeros({4, 3}, at::kDouble);
  save_checkpoint(dir(), 2, 0, 1, eight, {}, "", nullptr);
  expect_message([&] { load_checkpoint(dir(), {{"layers.9.mlp.fc1.weight", at::zeros({4, 3}, at::kDouble)}}); },
                 "train.load " + dir() + ": checkpoint has no parameter layers.9.mlp.fc1.weight "
                 "(it was saved for a model with 8 layers?)");
  expect_message([&] { load_checkpoint(dir(), {{"layers.3.mlp.fc1.weight", at::zeros({5, 3}, at::kDouble)}}); },
                 "parameter layers.3.mlp.fc1.weight has shape [4, 3] in the checkpoint but [5, 3] in this model");
  const std::string missing = (dir_ / "nope").string();
  expect_message([&] { load_checkpoint(missing, {}); }, "train.load " + missing + ": no such directory");
  fs::create_directories(dir_ / "empty");
  expect_message([&] { load_checkpoint((dir_ / "empty").string(), {}); }, "not a checkpoint");
  EXPECT_FALSE(latest_checkpoint((dir_ / "empty").string()).has_value());
  EXPECT_FALSE(latest_checkpoint(missing).has_value());
  std::ofstream(dir_ / "latest", std::ios::trunc) << "step-77\n";
  expect_message([&] { load_checkpoint(dir(), {}); }, "latest names step-77");
}

TEST_F(Checkpoint, SaveRejectsBadArguments) {
  NamedParams p{{"w", at::zeros({2})}};
  expect_message([&] { save_checkpoint(dir(), 1, 0, 1, p, {}, "{not json", nullptr); }, "not valid JSON");
  expect_message([&] { save_checkpoint(dir(), 1, 2, 2, p, {}, "", [] {}); }, "rank 2 is not in [0, 2)");
  expect_message([&] { save_checkpoint(dir(), 1, 0, 2, p, {}, "", nullptr); }, "a barrier is required");
  expect_message([&] { save_checkpoint(dir(), -1, 0, 1, p, {}, "", nullptr); }, "train.save");
  expect_message([&] { save_checkpoint("", 1, 0, 1, p, {}, "", nullptr); }, "train.save: a checkpoint directory");
  expect_message([&] { save_checkpoint(dir(), 1, 0, 1, {{"adam.step", at::zeros({1})}}, {}, "", nullptr); },
                 "reserved");
  AdamWState st;
  st.params["other"] = {at::zeros({2}), at::zeros({2}), 1};
  expect_message([&] { save_checkpoint(dir(), 1, 0, 1, p, st, "", nullptr); }, "not a parameter of this rank");
  EXPECT_FALSE(fs::exists(dir_ / "latest"));
}

void flip_byte(const fs::path& p, std::uintmax_t offset) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
}

// Issue 15 item 5: a flipped byte, a truncated or a missing shard, and a changed meta.json are
// each reported in one line naming the file, by the check that runs before any rank starts and
// by the load itself.
TEST_F(Checkpoint, AFlippedByteATruncatedAndAMissingShardAreNamed) {
  NamedParams r0 = params_where(1.0, first_half);
  NamedParams r1 = params_where(1.0, second_half);
  write_checkpoint_shard(dir(), 3, 0, 2, r0, trained_state(r0));
  write_checkpoint_shard(dir(), 3, 1, 2, r1, trained_state(r1));
  finalize_checkpoint(dir(), 3, 2, R"({"layers":4})");
  const NamedParams all = zeros_like_all(params_where(0.0, everything));
  EXPECT_EQ(verify_checkpoint(dir()).step, 3);
  const fs::path shard = dir_ / "step-3" / "rank-1.pt";
  const fs::path copy = dir_ / "rank-1.pt.good";
  fs::copy_file(shard, copy);

  flip_byte(shard, fs::file_size(shard) / 2);
  const std::string corrupt = shard.string() + " is corrupt (its CRC-32 is ";
  expect_message([&] { verify_checkpoint(dir()); }, "train.load " + dir() + ": " + corrupt);
  expect_message([&] { load_checkpoint(dir(), all); }, corrupt);

  fs::resize_file(shard, fs::file_size(copy) - 10);
  expect_message([&] { verify_checkpoint(dir()); },
                 shard.string() + " is truncated (" + std::to_string(fs::file_size(copy) - 10) + " of ");
  fs::remove(shard);
  expect_message([&] { verify_checkpoint(dir()); }, shard.string() + " is missing");
  fs::copy_file(copy, shard);
  EXPECT_EQ(load_checkpoint(dir(), all).step, 3);

  // meta.json: a changed digit of the step still parses, but its checksum no longer matches.
  const fs::path meta = dir_ / "step-3" / "meta.json";
  std::string text = read_file(meta);
  const auto at = text.find("\"step\": 3");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 8] = '4';
  std::ofstream(meta, std::ios::trunc) << text;
  expect_message([&] { read_checkpoint_info(dir()); }, meta.string() + " is corrupt (its CRC-32 is ");
  std::ofstream(meta, std::ios::trunc) << text.substr(0, text.size() / 2);
  expect_message([&] { verify_checkpoint(dir()); }, meta.string() + " is corrupt or truncated (not valid JSON");
}

// Issue 15 item 4.
TEST_F(Checkpoint, KeepLastTwoLeavesExactlyTwoCompleteCheckpointsAfterTenSaves) {
  NamedParams p = params_where(1.0, everything);
  CheckpointRetention keep;
  keep.keep_last = 2;
  for (int step = 1; step <= 10; ++step) {
    int agreements = 0;
    const auto r = try_save_checkpoint(dir(), step, 0, 1, p, {}, "", [&](bool ok) { ++agreements; return ok; }, keep);
    EXPECT_TRUE(r.ok) << r.error;
    EXPECT_EQ(agreements, 2);
  }
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-10", "step-9"}));
  EXPECT_EQ(verify_checkpoint((dir_ / "step-9").string()).step, 9);
  EXPECT_EQ(verify_checkpoint(dir()).step, 10);

  // --keep-every 4 keeps the multiples of 4 as well; latest is never pruned, even when older.
  keep.keep_every = 4;
  for (int step = 11; step <= 14; ++step) ASSERT_TRUE(try_save_checkpoint(dir(), step, 0, 1, p, {}, "", nullptr, keep).ok);
  std::ofstream(dir_ / "latest", std::ios::trunc) << "step-13\n";
  keep.keep_last = 1;
  EXPECT_EQ(prune_checkpoints(dir(), keep), std::vector<std::int64_t>{});
  EXPECT_TRUE(fs::exists(dir_ / "step-13"));
  EXPECT_TRUE(fs::exists(dir_ / "step-14"));
  EXPECT_TRUE(fs::exists(dir_ / "step-12"));
  EXPECT_FALSE(fs::exists(dir_ / "step-10"));
  EXPECT_FALSE(fs::exists(dir_ / "step-11"));
  EXPECT_FALSE(fs::exists(dir_ / "step-8"));  // a multiple of 4, but pruned before --keep-every was given
}

// Issue 15 item 3: a full disk in the middle of a shard.
TEST_F(Checkpoint, AFailedSaveNamesTheFileTheBytesAndWhyAndLeavesLatest) {
  NamedParams p = params_where(1.0, everything);
  ASSERT_TRUE(try_save_checkpoint(dir(), 1, 0, 1, p, {}, "", nullptr).ok);
  set_checkpoint_write_fault([](const std::string& file, std::size_t, std::size_t) {
    return file.find("rank-0.pt.tmp") != std::string::npos ? ENOSPC : 0;
  });
  const auto r = try_save_checkpoint(dir(), 2, 0, 1, p, {}, "", nullptr);
  set_checkpoint_write_fault(nullptr);
  EXPECT_FALSE(r.ok);
  const fs::path file = dir_ / "step-2.tmp" / "rank-0.pt.tmp";
  EXPECT_NE(r.error.find("train.save " + dir() + ": writing shard 0 of step 2 failed: cannot write " + file.string() +
                         " (0 of "),
            std::string::npos)
      << r.error;
  EXPECT_NE(r.error.find(" bytes written): No space left on device; step-1 stays the latest checkpoint"), std::string::npos)
      << r.error;
  EXPECT_EQ(r.error.find('\n'), std::string::npos);
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-1"}));
  EXPECT_EQ(load_checkpoint(dir(), zeros_like_all(p)).step, 1);

  // A directory under a regular file: refused up front, and a save there fails in one line.
  std::ofstream(dir_ / "plain") << "x";
  const std::string under_file = (dir_ / "plain" / "ck").string();
  expect_message([&] { check_checkpoint_dir_writable(under_file); },
                 "train.save " + under_file + ": cannot create the directory (Not a directory)");
  const auto r2 = try_save_checkpoint(under_file, 1, 0, 1, p, {}, "", nullptr);
  EXPECT_FALSE(r2.ok);
  EXPECT_NE(r2.error.find("Not a directory; there is no earlier checkpoint"), std::string::npos) << r2.error;
}

// A rank that fails makes every rank's outcome a failure; only it carries the message.
TEST_F(Checkpoint, AFailureOnOneRankIsEveryRanksOutcome) {
  NamedParams r0 = params_where(1.0, first_half);
  NamedParams r1 = params_where(1.0, second_half);
  // Rank 1 runs first with an agreement that reports rank 0 as fine; then rank 0 learns of rank 1's failure.
  set_checkpoint_write_fault([](const std::string& file, std::size_t, std::size_t) {
    return file.find("rank-1.pt.tmp") != std::string::npos ? EROFS : 0;
  });
  const auto a = try_save_checkpoint(dir(), 1, 1, 2, r1, {}, "", [](bool ok) { return ok; });
  set_checkpoint_write_fault(nullptr);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.error.find("Read-only file system"), std::string::npos) << a.error;
  const auto b = try_save_checkpoint(dir(), 1, 0, 2, r0, {}, "", [](bool) { return false; });
  EXPECT_FALSE(b.ok);
  EXPECT_EQ(b.error, "");
  EXPECT_FALSE(fs::exists(dir_ / "step-1.tmp"));
  EXPECT_FALSE(fs::exists(dir_ / "latest"));
}

}  // namespace
}  // namespace hp::train
