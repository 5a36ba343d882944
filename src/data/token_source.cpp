#include "data/token_source.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "data/mapped_file.hpp"
#include "data/rng.hpp"

namespace hp::data {
namespace {

class ByteSource final : public TokenSource {
 public:
  ByteSource(std::vector<std::uint8_t> bytes, std::string what) : bytes_(std::move(bytes)), what_(std::move(what)) {}
  std::size_t size() const override { return bytes_.size(); }
  std::int64_t at(std::size_t i) const override { return bytes_[i]; }
  std::int64_t vocab_size() const override { return 256; }
  std::string describe() const override { return what_; }

 private:
  std::vector<std::uint8_t> bytes_;
  std::string what_;
};

// A token file, read through its mapping.
class MappedSource final : public TokenSource {
 public:
  MappedSource(const std::string& path, int width, std::int64_t vocab)
      : path_(path), width_(width), vocab_(vocab), file_(path, "token file") {
    if (file_.size() == 0 || file_.size() % width_ != 0)
      throw std::invalid_argument("data.data " + path + ": size " + std::to_string(file_.size()) +
                                  " is not a positive multiple of " + std::to_string(width_) + " bytes per token");
    if (vocab_ <= 0) {
      for (std::size_t i = 0; i < size(); ++i) vocab_ = std::max(vocab_, at(i) + 1);
    }
  }

  std::size_t size() const override { return file_.size() / width_; }
  std::int64_t at(std::size_t i) const override {
    const auto* p = file_.data() + i * width_;
    if (width_ == 2) return p[0] | (p[1] << 8);
    return static_cast<std::int64_t>(p[0]) | (static_cast<std::int64_t>(p[1]) << 8) |
           (static_cast<std::int64_t>(p[2]) << 16) | (static_cast<std::int64_t>(p[3]) << 24);
  }
  std::int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override {
    return path_ + " (uint" + std::to_string(8 * width_) + ", " + std::to_string(size()) + " tokens)";
  }

 private:
  std::string path_;
  int width_;
  std::int64_t vocab_;
  MappedFile file_;
};

template <std::size_t N>
const char* pick(SplitMix64& rng, const std::array<const char*, N>& words) {
  return words[rng.next() % N];
}

}  // namespace

std::unique_ptr<TokenSource> embedded_corpus(std::size_t bytes, std::uint64_t seed) {
  static constexpr std::array<const char*, 8> kSubjects = {"the cat", "a dog", "the old man", "my sister",
                                                           "the bird", "a child", "the teacher", "our king"};
  static constexpr std::array<const char*, 8> kVerbs = {"sees", "likes", "finds", "paints",
                                                        "carries", "follows", "helps", "watches"};
  static constexpr std::array<const char*, 8> kObjects = {"a red ball", "the green door", "some bread",
                                                          "a small boat", "the river", "two apples",
                                                          "the moon", "a blue hat"};
  static constexpr std::array<const char*, 6> kPlaces = {"in the garden", "at night", "near the sea",
                                                         "on the hill", "after school", "in the rain"};
  SplitMix64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::string text;
  text.reserve(bytes + 64);
  while (text.size() < bytes) {
    std::string s = pick(rng, kSubjects);
    s += ' ';
    s += pick(rng, kVerbs);
    s += ' ';
    s += pick(rng, kObjects);
    if (rng.next() % 2) {
      s += ' ';
      s += pick(rng, kPlaces);
    }
    s += ". ";
    s[0] = static_cast<char>(s[0] - 'a' + 'A');
    text += s;
  }
  text.resize(bytes);
  return std::make_unique<ByteSource>(std::vector<std::uint8_t>(text.begin(), text.end()),
                                      "embedded corpus (" + std::to_string(bytes) + " bytes of grammar sentences)");
}

std::unique_ptr<TokenSource> text_file(const std::string& path) {
  // A device or a pipe (/dev/zero, a FIFO) never ends: read regular files only.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::invalid_argument("data.data " + path + ": not a regular file (a text file is read whole)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("data.data " + path + ": cannot open the text file");
  std::vector<std::uint8_t> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {  // libstdc++ throws from a failed read (e.g. /proc/self/mem)
    throw std::invalid_argument("data.data " + path + ": reading the text file failed (" + std::strerror(errno) + ")");
  }
  if (bytes.empty()) throw std::invalid_argument("data.data " + path + ": the text file is empty");
  return std::make_unique<ByteSource>(std::move(bytes), path + " (bytes)");
}

std::unique_ptr<TokenSource> token_file(const std::string& path, int bytes_per_token, std::int64_t vocab_size) {
  if (bytes_per_token != 2 && bytes_per_token != 4)
    throw std::invalid_argument("data.data " + path + ": tokens must be uint16 or uint32");
  return std::make_unique<MappedSource>(path, bytes_per_token, vocab_size);
}

namespace {

class SliceSource final : public TokenSource {
 public:
  SliceSource(std::shared_ptr<const TokenSource> source, std::size_t begin, std::size_t end)
      : source_(std::move(source)), begin_(begin), end_(end) {}
  std::size_t size() const override { return end_ - begin_; }
  std::int64_t at(std::size_t i) const override { return source_->at(begin_ + i); }
  std::int64_t vocab_size() const override { return source_->vocab_size(); }
  std::string describe() const override {
    return source_->describe() + " [" + std::to_string(begin_) + ", " + std::to_string(end_) + ")";
  }

 private:
  std::shared_ptr<const TokenSource> source_;
  std::size_t begin_, end_;
};

}  // namespace

std::unique_ptr<TokenSource> slice_source(std::shared_ptr<const TokenSource> source, std::size_t begin,
                                          std::size_t end) {
  if (!source || begin >= end || end > source->size())
    throw std::invalid_argument("slice_source: [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") is not a non-empty range of a source of " +
                                std::to_string(source ? source->size() : 0) + " tokens");
  return std::make_unique<SliceSource>(std::move(source), begin, end);
}

std::unique_ptr<TokenSource> open_source(const std::string& spec) {
  auto ends_with = [&](const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return spec.size() >= n && spec.compare(spec.size() - n, n, suffix) == 0;
  };
  if (spec.empty() || spec == "embedded") return embedded_corpus();
  if (spec.rfind("text:", 0) == 0) return text_file(spec.substr(5));
  for (auto [prefix, width] : {std::pair{"u16:", 2}, std::pair{"u32:", 4}}) {
    if (spec.rfind(prefix, 0) != 0) continue;
    const std::string rest = spec.substr(4);
    const auto colon = rest.rfind(':');
    std::int64_t vocab = 0;
    std::string path = rest;
    if (colon != std::string::npos) {
      try {
        vocab = std::stoll(rest.substr(colon + 1));
        path = rest.substr(0, colon);
      } catch (const std::exception&) {
        // No vocabulary suffix: the whole rest is the path.
      }
    }
    return token_file(path, width, vocab);
  }
  if (ends_with(".u16") || ends_with(".bin")) return token_file(spec, 2, 0);
  if (ends_with(".u32")) return token_file(spec, 4, 0);
  if (ends_with(".txt")) return text_file(spec);
  throw std::invalid_argument("data.data " + spec +
                              ": unknown data spec; use embedded, text:PATH, u16:PATH[:VOCAB], u32:PATH[:VOCAB] "
                              "or a path ending in .txt, .u16, .bin or .u32");
}

}  // namespace hp::data
