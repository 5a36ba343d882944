#include "data/tokenizer.hpp"

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "data/sentencepiece_wire.hpp"

extern char** environ;

namespace hp::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kHelper = "hyperpipe-sentencepiece";

// $HYPERPIPE_SENTENCEPIECE, beside the running binary, or in the build tree.
std::string helper_path() {
  if (const char* env = std::getenv("HYPERPIPE_SENTENCEPIECE")) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(exe.parent_path() / kHelper)) return (exe.parent_path() / kHelper).string();
  if (fs::exists(HP_SENTENCEPIECE_HELPER_BUILT)) return HP_SENTENCEPIECE_HELPER_BUILT;
  throw std::runtime_error(std::string("the tokenizer helper ") + kHelper +
                           " is neither beside this binary nor in the build tree (set HYPERPIPE_SENTENCEPIECE)");
}

// The helper running `args`, its stdin and stdout one end of a socket pair.
// posix_spawn, not fork: the caller may have LibTorch's threads.
class Helper {
 public:
  explicit Helper(const std::vector<std::string>& args) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
      throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    const std::string path = helper_path();
    std::vector<std::string> argv_text = {path};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    const int rc = ::posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      throw std::runtime_error("cannot start " + path + ": " + std::strerror(rc));
    }
    fd_ = fds[0];
  }
  ~Helper() {
    ::close(fd_);  // the helper reads EOF and ends
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;
  int fd() const { return fd_; }
  // Reads the status byte; on 0, the error text it carries.
  bool answer(std::string* error) const {
    std::uint8_t ok = 0;
    if (!wire::read_u8(fd_, ok)) broken();
    if (!ok && !wire::read_bytes(fd_, *error)) *error = "(no reason given)";
    return ok != 0;
  }
  [[noreturn]] void broken() const {
    throw std::runtime_error(std::string("the tokenizer helper ") + kHelper + " ended");
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : path_(path), helper_({"serve", path}) {
    std::string error;
    if (!helper_.answer(&error))
      throw std::invalid_argument("data.tokenizer_model " + path + ": not a SentencePiece model (" + error + ")");
    std::vector<int> status;
    if (!wire::read_ids(helper_.fd(), status) || status.size() != 3) helper_.broken();
    pieces_ = status[0];
    eos_ = status[1];
    unk_ = status[2];
    if (eos_ < 0)
      throw std::invalid_argument("data.tokenizer_model " + path +
                                  ": the model has no end-of-sentence piece (</s>) to end documents with");
  }

  std::vector<std::int64_t> encode(const std::string& text) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!wire::write_u8(helper_.fd(), 'E') || !wire::write_bytes(helper_.fd(), text)) helper_.broken();
    std::string error;
    if (!helper_.answer(&error)) throw std::runtime_error("SentencePiece encode: " + error);
    std::vector<int> ids;
    if (!wire::read_ids(helper_.fd(), ids)) helper_.broken();
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<std::int64_t>& ids) const override {
    std::vector<int> in;
    in.reserve(ids.size());
    for (auto id : ids) in.push_back(id >= 0 && id < pieces_ ? static_cast<int>(id) : unk_);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!wire::write_u8(helper_.fd(), 'D') || !wire::write_ids(helper_.fd(), in)) helper_.broken();
    std::string error, text;
    if (!helper_.answer(&error)) throw std::runtime_error("SentencePiece decode: " + error);
    if (!wire::read_bytes(helper_.fd(), text)) helper_.broken();
    return text;
  }
  std::int64_t vocab_size() const override { return pieces_; }
  std::int64_t end_of_document() const override { return eos_; }
  std::string describe() const override { return path_ + " (SentencePiece, " + std::to_string(pieces_) + " pieces)"; }

 private:
  std::string path_;
  Helper helper_;
  mutable std::mutex mutex_;  // one request at a time on the socket
  int pieces_ = 0, eos_ = -1, unk_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> sentencepiece_tokenizer(const std::string& model_path) {
  if (!fs::is_regular_file(model_path))
    throw std::invalid_argument("data.tokenizer_model " + model_path + ": no such file");
  return std::make_unique<SentencePieceTokenizer>(model_path);
}

std::string train_sentencepiece(const std::vector<std::string>& documents, const std::string& model_prefix,
                                int vocab_size) {
  Helper helper({"train", model_prefix, std::to_string(vocab_size)});
  const std::uint64_t count = documents.size();
  bool sent = wire::write_all(helper.fd(), &count, sizeof count);
  for (const auto& d : documents) sent = sent && wire::write_bytes(helper.fd(), d);
  if (!sent) helper.broken();
  std::string error;
  if (!helper.answer(&error))
    throw std::invalid_argument("tokenize.vocab_size " + std::to_string(vocab_size) +
                                ": training the SentencePiece model failed: " + error);
  return model_prefix + ".model";
}

}  // namespace hp::data
