// hyperpipe-sentencepiece: SentencePiece in a process of its own, served over
// stdin/stdout (data/sentencepiece_wire.hpp says why and how). Not meant to
// be run by hand.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

#include "data/sentencepiece_wire.hpp"

namespace {

namespace wire = hp::data::wire;
constexpr int kIn = STDIN_FILENO, kOut = STDOUT_FILENO;

int serve(const std::string& model) {
  sentencepiece::SentencePieceProcessor sp;
  const auto loaded = sp.Load(model);
  if (!loaded.ok()) return wire::write_u8(kOut, 0) && wire::write_bytes(kOut, loaded.ToString()) ? 0 : 1;
  const std::vector<int> status = {sp.GetPieceSize(), sp.eos_id(), sp.unk_id()};
  if (!wire::write_u8(kOut, 1) || !wire::write_ids(kOut, status)) return 1;
  std::uint8_t op = 0;
  std::string text;
  std::vector<int> ids;
  while (wire::read_u8(kIn, op)) {
    sentencepiece::util::Status s;
    if (op == 'E') {
      if (!wire::read_bytes(kIn, text)) return 1;
      ids.clear();
      s = sp.Encode(text, &ids);
      if (s.ok() && !(wire::write_u8(kOut, 1) && wire::write_ids(kOut, ids))) return 1;
    } else if (op == 'D') {
      if (!wire::read_ids(kIn, ids)) return 1;
      text.clear();
      s = sp.Decode(ids, &text);
      if (s.ok() && !(wire::write_u8(kOut, 1) && wire::write_bytes(kOut, text))) return 1;
    } else {
      return 1;
    }
    if (!s.ok() && !(wire::write_u8(kOut, 0) && wire::write_bytes(kOut, s.ToString()))) return 1;
  }
  return 0;
}

class Documents final : public sentencepiece::SentenceIterator {
 public:
  explicit Documents(std::vector<std::string> docs) : docs_(std::move(docs)) { skip_empty(); }
  bool done() const override { return i_ >= docs_.size(); }
  void Next() override {
    ++i_;
    skip_empty();
  }
  const std::string& value() const override { return docs_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void skip_empty() {
    while (i_ < docs_.size() && docs_[i_].empty()) ++i_;
  }
  std::vector<std::string> docs_;
  std::size_t i_ = 0;
};

int train(const std::string& prefix, const std::string& vocab) {
  std::uint64_t count = 0;
  if (!wire::read_all(kIn, &count, sizeof count)) return 1;
  std::vector<std::string> docs(count);
  for (auto& d : docs)
    if (!wire::read_bytes(kIn, d)) return 1;
  Documents it(std::move(docs));
  // Documents are whole lines: let the trainer see up to 64 KiB of each, and
  // sample at most a million of them. Its log goes nowhere; its status back.
  const std::unordered_map<std::string, std::string> args = {
      {"model_prefix", prefix},          {"vocab_size", vocab},
      {"model_type", "bpe"},             {"character_coverage", "1.0"},
      {"byte_fallback", "true"},         {"max_sentence_length", "65536"},
      {"input_sentence_size", "1000000"}, {"shuffle_input_sentence", "true"}};
  std::freopen("/dev/null", "w", stderr);
  const auto s = sentencepiece::SentencePieceTrainer::Train(args, &it);
  if (s.ok()) return wire::write_u8(kOut, 1) ? 0 : 1;
  return wire::write_u8(kOut, 0) && wire::write_bytes(kOut, s.ToString()) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "serve" && argc == 3) return serve(argv[2]);
  if (mode == "train" && argc == 4) return train(argv[2], argv[3]);
  std::fprintf(stderr, "hyperpipe-sentencepiece: the tokenizer helper of hyperpipe (serve MODEL | train PREFIX VOCAB)\n");
  return 2;
}
