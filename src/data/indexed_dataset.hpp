// Megatron-LM's indexed dataset (the MMIDIDX format that
// tools/preprocess_data.py writes): PREFIX.bin holds the token ids of every
// sequence back to back; PREFIX.idx holds
//   "MMIDIDX\0\0", version <Q (1), dtype code <B, sequence count <Q,
//   document count <Q, sequence lengths int32[sequences], byte pointers into
//   .bin int64[sequences], document indices int64[documents]
// where document d spans sequences [doc[d], doc[d + 1]) (doc[0] = 0, the last
// = sequences). preprocess_data.py writes one sequence per document, with the
// end-of-document token appended when asked (--append-eod).
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hp::data {

class MappedFile;

// Megatron's dtype codes (indexed_dataset.DType); floats hold no tokens.
enum class TokenDtype : std::uint8_t { kUint8 = 1, kInt8 = 2, kInt16 = 3, kInt32 = 4, kInt64 = 5, kUint16 = 8 };

// Megatron's DType.optimal_dtype: uint16 below a vocabulary of 65500, else int32.
TokenDtype optimal_dtype(std::int64_t vocab_size);

// True when PREFIX.idx and PREFIX.bin both exist.
bool is_indexed_dataset(const std::string& prefix);

// A read-only mapping of both files, validated when opened: a wrong magic,
// version or dtype code, or a file shorter than its index says, throws
// std::invalid_argument naming the file and what is wrong. Immutable after
// construction; every read is const and thread-safe.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;  // (the mappings are its own)
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  TokenDtype dtype() const { return dtype_; }
  std::size_t sequences() const { return sequences_; }
  std::size_t documents() const { return documents_ - 1; }
  // The first sequence of document d; d == documents() gives sequences().
  std::int64_t document_start(std::size_t d) const;
  std::int64_t length(std::size_t sequence) const;
  // Token j of a sequence (j < length(sequence)).
  std::int64_t token(std::size_t sequence, std::size_t j) const;
  // The largest token id + 1 (a scan of .bin, done once on first call).
  std::int64_t vocab_size() const;

 private:
  std::string prefix_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  int itemsize_ = 2;
  std::size_t sequences_ = 0, documents_ = 0;
  // The index's arrays (unaligned: the header is 34 bytes), read by memcpy.
  const unsigned char* lengths_ = nullptr;
  const unsigned char* pointers_ = nullptr;
  const unsigned char* document_starts_ = nullptr;
  std::int64_t pointer(std::size_t sequence) const;
  std::unique_ptr<MappedFile> idx_, bin_;
  mutable std::once_flag vocab_once_;
  mutable std::int64_t vocab_ = 0;
};

// Writes PREFIX.bin and PREFIX.idx as Megatron's IndexedDatasetBuilder does,
// one sequence per document. Both files appear only when finish() succeeds
// (written under .tmp names and renamed), so a killed run leaves no half
// dataset under the prefix. Not thread-safe.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, TokenDtype dtype);
  ~IndexedDatasetWriter();
  // Appends one document; throws std::invalid_argument on a token the dtype
  // cannot hold.
  void add_document(const std::vector<std::int64_t>& tokens);
  void finish();
  std::size_t documents() const { return lengths_.size(); }
  std::int64_t tokens() const { return tokens_; }

 private:
  std::string prefix_;
  TokenDtype dtype_;
  std::ofstream bin_;
  std::vector<std::int32_t> lengths_;
  std::int64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace hp::data
