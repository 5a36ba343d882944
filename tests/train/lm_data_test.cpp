#include "train/lm_data.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>

#include "data/indexed_dataset.hpp"

namespace hp::train {
namespace {

// A rank takes from the data source only the rows of what it reads (spec
// decision D4): a middle rank nothing, stage 0's rank the rows of its
// micro-batches' inputs, the last stage's rank every row for the labels.
TEST(LmData, ARankReadsOnlyTheRowsOfWhatItConsumes) {
  LmDataOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 8;
  LmData data(o);
  const std::int64_t window = o.seq_len + 1;
  auto read = [&](const runtime::Reads& reads) {
    const std::int64_t before = data.tokens_read();
    const auto micros = data.batch(5, 4, reads, 7);
    EXPECT_EQ(micros.size(), 4u);
    return data.tokens_read() - before;
  };
  EXPECT_EQ(read({}), 0);
  EXPECT_EQ(read({{1, 3}, false, false}), 2 * o.micro_batch_size * window);
  EXPECT_EQ(read({{}, true, false}), 4 * o.micro_batch_size * window);
  // A data-parallel replica's last stage reads the labels of its own micro-batches only.
  EXPECT_EQ(read({{}, true, false, 2, 4}), 2 * o.micro_batch_size * window);
  // What is read is what the whole batch holds there.
  const auto whole = data.batch(5, 4, {{0, 1, 2, 3}, true, false}, 7);
  const auto mine = data.batch(5, 4, {{2}, false, false}, 7);
  for (int m = 0; m < 4; ++m) {
    EXPECT_EQ(mine[m].input.defined(), m == 2);
    EXPECT_FALSE(mine[m].target.defined());
  }
  EXPECT_TRUE(mine[2].input.equal(whole[2].input));
}

// --variable-seq-len: each micro-batch has its own length in [seq/2, seq],
// the same for every rank that reads it, and labels one token ahead.
TEST(LmData, VariableLengthsAreDrawnPerMicroBatchTheSameOnEveryRank) {
  LmDataOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 16;
  o.variable_seq_len = true;
  LmData data(o);
  const auto whole = data.batch(3, 8, {{0, 1, 2, 3, 4, 5, 6, 7}, true, false}, 11);
  std::set<std::int64_t> lengths;
  for (int m = 0; m < 8; ++m) {
    const std::int64_t len = whole[m].input.size(1);
    EXPECT_EQ(len, data.seq_len_of(3, 8, m, 11));
    EXPECT_GE(len, 8);
    EXPECT_LE(len, 16);
    ASSERT_EQ(whole[m].target.sizes(), whole[m].input.sizes());
    // One window: the label at t is the input at t + 1.
    EXPECT_TRUE(whole[m].target.slice(1, 0, len - 1).equal(whole[m].input.slice(1, 1, len))) << "micro " << m;
    EXPECT_FALSE(whole[m].target.equal(whole[m].input)) << "micro " << m;
    lengths.insert(len);
  }
  EXPECT_GT(lengths.size(), 2u);
  const auto last = data.batch(3, 8, {{}, true, false}, 11);
  const auto owner = data.batch(3, 8, {{5}, false, false}, 11);
  for (int m = 0; m < 8; ++m) EXPECT_TRUE(last[m].target.equal(whole[m].target));
  EXPECT_TRUE(owner[5].input.equal(whole[5].input));
}

// --data PREFIX: batches are Megatron GPT samples of the train part, and the
// validation part of --split is the held-out data.
TEST(LmData, AMegatronDatasetTrainsOnItsTrainPartAndEvaluatesOnItsValidationPart) {
  const std::string prefix = ::testing::TempDir() + "lm_data_indexed";
  {
    data::IndexedDatasetWriter w(prefix, data::TokenDtype::kUint16);
    for (int d = 0; d < 10; ++d) w.add_document(std::vector<std::int64_t>(20, d));
    w.finish();
  }
  LmDataOptions o;
  o.micro_batch_size = 2;
  o.seq_len = 8;
  o.data = prefix;
  o.split = "8,2,0";
  LmData data(o);
  data.validate(16, 32);
  ASSERT_TRUE(data.has_eval_data());
  const runtime::Reads all{{0, 1, 2}, true, false};
  for (std::int64_t step = 0; step < 20; ++step) {
    for (const auto& m : data.batch(step, 3, all, 7)) EXPECT_LT(m.input.max().item<std::int64_t>(), 8);
    for (const auto& m : data.eval_batch(step, 3, all, 7)) EXPECT_GE(m.input.min().item<std::int64_t>(), 8);
  }
  // Each batch reads its own samples: consecutive batches differ, the same one repeats.
  EXPECT_TRUE(data.batch(4, 3, all, 7)[1].input.equal(data.batch(4, 3, all, 7)[1].input));
  EXPECT_FALSE(data.batch(4, 3, all, 7)[1].input.equal(data.batch(5, 3, all, 7)[1].input));
  try {
    data.validate(8, 32);
    ADD_FAILURE() << "token 9 fit a vocabulary of 8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has token ids up to 9 but model.vocab_size is 8"), std::string::npos);
  }
}

TEST(LmData, ASplitOfDataThatIsNotAMegatronDatasetIsRefused) {
  LmDataOptions o;
  o.split = "9,1,0";
  try {
    LmData data(o);
    ADD_FAILURE() << "accepted data.split for the embedded corpus";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("data.split 9,1,0 divides the documents of a Megatron indexed dataset", 0),
              0u)
        << e.what();
  }
}

}  // namespace
}  // namespace hp::train
