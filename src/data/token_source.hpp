// Sources of training tokens. A TokenSource is an immutable sequence of token
// ids; every rank opens the same source and reads the same batches. Reads are
// thread-safe (const, no shared mutable state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hp::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual std::size_t size() const = 0;
  virtual std::int64_t at(std::size_t i) const = 0;
  // Smallest vocabulary that holds every token this source can produce.
  virtual std::int64_t vocab_size() const = 0;
  virtual std::string describe() const = 0;
};

// The embedded default corpus: `bytes` bytes of English-like sentences from a
// small fixed grammar (subject, verb, object, place), drawn with a seeded
// generator; byte tokens (vocab 256). Deterministic for a seed, and learnable:
// the words, their order and the punctuation are predictable, so the loss of
// a byte-level GPT falls quickly from ln(256) ~ 5.5 towards ~1.
std::unique_ptr<TokenSource> embedded_corpus(std::size_t bytes = 1 << 20, std::uint64_t seed = 0);

// A raw text file, one byte = one token (vocab 256).
std::unique_ptr<TokenSource> text_file(const std::string& path);

// A pre-tokenized file of little-endian uint16 or uint32 ids, read through mmap.
std::unique_ptr<TokenSource> token_file(const std::string& path, int bytes_per_token, std::int64_t vocab_size);

// The tokens [begin, end) of `source` as a source of their own (a split of
// one corpus into training and held-out parts). Throws std::invalid_argument
// unless begin < end <= source->size().
std::unique_ptr<TokenSource> slice_source(std::shared_ptr<const TokenSource> source, std::size_t begin,
                                          std::size_t end);

// Opens a `--data` spec: "embedded", "text:PATH", "u16:PATH:VOCAB", "u32:PATH:VOCAB",
// or a bare PATH (".txt" = text, ".u16"/".bin" = uint16, ".u32" = uint32;
// vocab read as max id + 1). Throws std::invalid_argument naming the spec.
std::unique_ptr<TokenSource> open_source(const std::string& spec);

}  // namespace hp::data
