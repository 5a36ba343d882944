// The MMIDIDX layout is checked against bytes packed here from Megatron's
// indexed_dataset.py (_IndexWriter), not against the writer under test.
#include "data/indexed_dataset.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace hp::data {
namespace {

std::string indexed_prefix(const char* name) { return ::testing::TempDir() + name; }

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                               static_cast<std::streamsize>(bytes.size()));
}

// struct.pack("<...") of one value.
template <class T>
void pack(std::vector<unsigned char>& out, T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

// Megatron's _IndexWriter.write(sequence_lengths, None, document_indices).
std::vector<unsigned char> megatron_index(std::uint8_t code, const std::vector<std::int32_t>& lengths,
                                          const std::vector<std::int64_t>& documents, int itemsize) {
  std::vector<unsigned char> b = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  pack<std::uint64_t>(b, 1);
  pack<std::uint8_t>(b, code);
  pack<std::uint64_t>(b, lengths.size());
  pack<std::uint64_t>(b, documents.size());
  for (auto n : lengths) pack<std::int32_t>(b, n);
  std::int64_t pointer = 0;  // _sequence_pointers: running byte offsets
  for (auto n : lengths) {
    pack<std::int64_t>(b, pointer);
    pointer += static_cast<std::int64_t>(n) * itemsize;
  }
  for (auto d : documents) pack<std::int64_t>(b, d);
  return b;
}

TEST(IndexedDatasetWriter, WritesMegatronsLayoutByteForByte) {
  const std::string prefix = indexed_prefix("writer_layout");
  IndexedDatasetWriter w(prefix, TokenDtype::kUint16);
  w.add_document({5, 6, 7});
  w.add_document({});
  w.add_document({65535});
  w.finish();
  EXPECT_EQ(file_bytes(prefix + ".idx"), megatron_index(8, {3, 0, 1}, {0, 1, 2, 3}, 2));
  EXPECT_EQ(file_bytes(prefix + ".bin"), (std::vector<unsigned char>{5, 0, 6, 0, 7, 0, 0xff, 0xff}));
  EXPECT_EQ(w.tokens(), 4);
}

TEST(IndexedDatasetWriter, LeavesNothingUnlessFinishedAndRefusesTokensItsDtypeCannotHold) {
  const std::string prefix = indexed_prefix("writer_unfinished");
  {
    IndexedDatasetWriter w(prefix, TokenDtype::kUint16);
    w.add_document({1, 2});
    EXPECT_THROW(w.add_document({70000}), std::invalid_argument);
  }
  EXPECT_FALSE(is_indexed_dataset(prefix));
  EXPECT_TRUE(file_bytes(prefix + ".bin.tmp").empty());
  EXPECT_EQ(optimal_dtype(65499), TokenDtype::kUint16);
  EXPECT_EQ(optimal_dtype(65500), TokenDtype::kInt32);
}

// preprocess_data.py --split-sentences writes several sequences a document.
TEST(IndexedDataset, ReadsAMegatronFileOfInt32SentencesGroupedInDocuments) {
  const std::string prefix = indexed_prefix("int32_sentences");
  put_bytes(prefix + ".idx", megatron_index(4, {2, 1, 3}, {0, 2, 3}, 4));
  std::vector<unsigned char> bin;
  for (std::int32_t t : {10, 11, 70000, 20, 21, 22}) pack(bin, t);
  put_bytes(prefix + ".bin", bin);
  ASSERT_TRUE(is_indexed_dataset(prefix));
  const IndexedDataset d(prefix);
  EXPECT_EQ(d.dtype(), TokenDtype::kInt32);
  EXPECT_EQ(d.sequences(), 3u);
  EXPECT_EQ(d.documents(), 2u);
  EXPECT_EQ(d.document_start(1), 2);
  EXPECT_EQ(d.document_start(2), 3);
  EXPECT_EQ(d.length(1), 1);
  EXPECT_EQ(d.token(1, 0), 70000);
  EXPECT_EQ(d.token(2, 2), 22);
  EXPECT_EQ(d.vocab_size(), 70001);
}

// Each defect is one line naming the file and what is wrong with it.
TEST(IndexedDataset, RefusesABadFileNamingItAndTheDefect) {
  const std::string prefix = indexed_prefix("bad");
  put_bytes(prefix + ".bin", {1, 0, 2, 0});
  const auto good = megatron_index(8, {2}, {0, 1}, 2);
  auto expect_refusal = [&](std::vector<unsigned char> idx, const std::string& file, const std::string& what) {
    put_bytes(prefix + ".idx", idx);
    try {
      IndexedDataset d(prefix);
      ADD_FAILURE() << "accepted a file with: " << what;
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("data.data " + prefix + file), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
    }
  };
  auto magic = good;
  magic[0] = 'X';
  expect_refusal(magic, ".idx", "does not start with MMIDIDX");
  auto version = good;
  version[9] = 2;
  expect_refusal(version, ".idx", "index version 2 is not supported");
  auto dtype = good;
  dtype[17] = 6;  // float64
  expect_refusal(dtype, ".idx", "dtype code 6 holds no token ids");
  expect_refusal({good.begin(), good.end() - 4}, ".idx", "truncated");
  expect_refusal({good.begin(), good.begin() + 20}, ".idx", "truncated");
  expect_refusal(megatron_index(8, {3}, {0, 1}, 2), ".bin", "truncated: sequence 0 ends at byte 6");
  put_bytes(prefix + ".idx", good);
  EXPECT_EQ(IndexedDataset(prefix).token(0, 1), 2);
}

}  // namespace
}  // namespace hp::data
