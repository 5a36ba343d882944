#include "data/indexed_dataset.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "data/mapped_file.hpp"

namespace hp::data {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

int itemsize_of(std::uint8_t code) {
  switch (static_cast<TokenDtype>(code)) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8: return 1;
    case TokenDtype::kInt16:
    case TokenDtype::kUint16: return 2;
    case TokenDtype::kInt32: return 4;
    case TokenDtype::kInt64: return 8;
  }
  return 0;
}

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::invalid_argument("data.data " + file + ": " + what);
}

template <class T>
T read_le(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // x86-64 and aarch64 Linux are little-endian, as the format is
  return v;
}

}  // namespace

TokenDtype optimal_dtype(std::int64_t vocab_size) {
  return vocab_size < 65500 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

bool is_indexed_dataset(const std::string& prefix) {
  struct stat st {};
  return !prefix.empty() && ::stat((prefix + ".idx").c_str(), &st) == 0 && ::stat((prefix + ".bin").c_str(), &st) == 0;
}

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const std::string idx = prefix + ".idx", bin = prefix + ".bin";
  idx_ = std::make_unique<MappedFile>(idx, "index");
  const unsigned char* p = idx_->data();
  const std::size_t idx_bytes = idx_->size();
  if (idx_bytes < kHeaderBytes)
    fail(idx, "truncated: " + std::to_string(idx_bytes) + " bytes, shorter than the " +
                  std::to_string(kHeaderBytes) + "-byte header");
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0)
    fail(idx, "not a Megatron indexed dataset index (the file does not start with MMIDIDX)");
  const auto version = read_le<std::uint64_t>(p + 9);
  if (version != 1) fail(idx, "index version " + std::to_string(version) + " is not supported (expected 1)");
  const std::uint8_t code = p[17];
  itemsize_ = itemsize_of(code);
  if (itemsize_ == 0)
    fail(idx, "dtype code " + std::to_string(code) +
                  " holds no token ids (expected 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64 or 8 uint16)");
  dtype_ = static_cast<TokenDtype>(code);
  sequences_ = read_le<std::uint64_t>(p + 18);
  documents_ = read_le<std::uint64_t>(p + 26);
  const std::size_t need = kHeaderBytes + sequences_ * 4 + sequences_ * 8 + documents_ * 8;
  if (sequences_ > idx_bytes || documents_ > idx_bytes || idx_bytes < need)
    fail(idx, "truncated: " + std::to_string(idx_bytes) + " bytes for " + std::to_string(sequences_) +
                  " sequences and " + std::to_string(documents_) + " document indices (" + std::to_string(need) +
                  " bytes needed)");
  lengths_ = p + kHeaderBytes;
  pointers_ = lengths_ + sequences_ * 4;
  document_starts_ = pointers_ + sequences_ * 8;
  if (documents_ == 0 || document_start(0) != 0 ||
      document_start(documents_ - 1) != static_cast<std::int64_t>(sequences_))
    fail(idx, "document indices must run from 0 to the sequence count " + std::to_string(sequences_));
  for (std::size_t d = 1; d < documents_; ++d)
    if (document_start(d) < document_start(d - 1))
      fail(idx, "document index " + std::to_string(d) + " goes backwards");
  bin_ = std::make_unique<MappedFile>(bin, "data file");
  for (std::size_t s = 0; s < sequences_; ++s) {
    const std::int64_t end = pointer(s) + length(s) * itemsize_;
    if (length(s) < 0 || pointer(s) < 0 || end > static_cast<std::int64_t>(bin_->size()))
      fail(bin, "truncated: sequence " + std::to_string(s) + " ends at byte " + std::to_string(end) +
                    " but the file has " + std::to_string(bin_->size()));
  }
}

IndexedDataset::~IndexedDataset() = default;

std::int64_t IndexedDataset::document_start(std::size_t d) const {
  return read_le<std::int64_t>(document_starts_ + d * 8);
}

std::int64_t IndexedDataset::length(std::size_t sequence) const {
  return read_le<std::int32_t>(lengths_ + sequence * 4);
}

std::int64_t IndexedDataset::pointer(std::size_t sequence) const {
  return read_le<std::int64_t>(pointers_ + sequence * 8);
}

std::int64_t IndexedDataset::token(std::size_t sequence, std::size_t j) const {
  const auto* p = bin_->data() + pointer(sequence) + j * itemsize_;
  switch (dtype_) {
    case TokenDtype::kUint8: return *p;
    case TokenDtype::kInt8: return static_cast<std::int8_t>(*p);
    case TokenDtype::kInt16: return read_le<std::int16_t>(p);
    case TokenDtype::kUint16: return read_le<std::uint16_t>(p);
    case TokenDtype::kInt32: return read_le<std::int32_t>(p);
    case TokenDtype::kInt64: return read_le<std::int64_t>(p);
  }
  return 0;
}

std::int64_t IndexedDataset::vocab_size() const {
  std::call_once(vocab_once_, [&] {
    std::int64_t top = -1;
    for (std::size_t s = 0; s < sequences_; ++s)
      for (std::int64_t j = 0, n = length(s); j < n; ++j) top = std::max(top, token(s, static_cast<std::size_t>(j)));
    vocab_ = top + 1;
  });
  return vocab_;
}

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, TokenDtype dtype)
    : prefix_(prefix), dtype_(dtype), bin_(prefix + ".bin.tmp", std::ios::binary | std::ios::trunc) {
  if (itemsize_of(static_cast<std::uint8_t>(dtype)) == 0) throw std::invalid_argument("IndexedDatasetWriter: bad dtype");
  if (!bin_) throw std::invalid_argument("cannot write " + prefix + ".bin.tmp: " + std::strerror(errno));
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (finished_) return;
  bin_.close();
  std::remove((prefix_ + ".bin.tmp").c_str());
  std::remove((prefix_ + ".idx.tmp").c_str());
}

void IndexedDatasetWriter::add_document(const std::vector<std::int64_t>& tokens) {
  const int size = itemsize_of(static_cast<std::uint8_t>(dtype_));
  const bool is_signed = dtype_ == TokenDtype::kInt8 || dtype_ == TokenDtype::kInt16 || dtype_ == TokenDtype::kInt32 ||
                         dtype_ == TokenDtype::kInt64;
  const std::int64_t top = size == 8 ? std::numeric_limits<std::int64_t>::max()
                                     : (std::int64_t{1} << (8 * size - (is_signed ? 1 : 0))) - 1;
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw std::invalid_argument("a document of " + std::to_string(tokens.size()) + " tokens is too long for int32 lengths");
  std::vector<unsigned char> bytes(tokens.size() * size);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] > top)
      throw std::invalid_argument("token " + std::to_string(tokens[i]) + " does not fit the dataset's dtype");
    std::memcpy(bytes.data() + i * size, &tokens[i], static_cast<std::size_t>(size));  // little-endian low bytes
  }
  bin_.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  lengths_.push_back(static_cast<std::int32_t>(tokens.size()));
  tokens_ += static_cast<std::int64_t>(tokens.size());
}

void IndexedDatasetWriter::finish() {
  bin_.close();
  if (!bin_) throw std::runtime_error("writing " + prefix_ + ".bin.tmp failed");
  const int size = itemsize_of(static_cast<std::uint8_t>(dtype_));
  std::ofstream idx(prefix_ + ".idx.tmp", std::ios::binary | std::ios::trunc);
  auto put = [&](const void* p, std::size_t n) { idx.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); };
  const std::uint64_t version = 1, sequences = lengths_.size(), documents = lengths_.size() + 1;
  const auto code = static_cast<std::uint8_t>(dtype_);
  put(kMagic, sizeof kMagic);
  put(&version, 8);
  put(&code, 1);
  put(&sequences, 8);
  put(&documents, 8);
  put(lengths_.data(), lengths_.size() * 4);
  std::int64_t pointer = 0;
  for (std::int32_t n : lengths_) {
    put(&pointer, 8);
    pointer += static_cast<std::int64_t>(n) * size;
  }
  for (std::int64_t d = 0; d <= static_cast<std::int64_t>(sequences); ++d) put(&d, 8);
  idx.close();
  if (!idx) throw std::runtime_error("writing " + prefix_ + ".idx.tmp failed");
  if (std::rename((prefix_ + ".bin.tmp").c_str(), (prefix_ + ".bin").c_str()) != 0 ||
      std::rename((prefix_ + ".idx.tmp").c_str(), (prefix_ + ".idx").c_str()) != 0)
    throw std::runtime_error("cannot rename the dataset files to " + prefix_ + ".bin/.idx: " + std::strerror(errno));
  finished_ = true;
}

}  // namespace hp::data
