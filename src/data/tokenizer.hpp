// Tokenizers: text to token ids and back. Bytes (one byte one token, vocab
// 256) stay the embedded default; a SentencePiece model (libsentencepiece)
// is the real one, read from the `.model` file that `hyperpipe tokenize`
// trains or that any SentencePiece user already has.
//
// Contract: immutable once made; encode and decode are const and may run on
// several threads at once (SentencePieceProcessor's are).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hp::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<std::int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<std::int64_t>& ids) const = 0;
  virtual std::int64_t vocab_size() const = 0;
  // The token `tokenize` appends after each document (SentencePiece's </s>).
  virtual std::int64_t end_of_document() const = 0;
  virtual std::string describe() const = 0;
};

// Throws std::invalid_argument "data.tokenizer_model PATH: ..." when the file
// is missing or not a SentencePiece model.
std::unique_ptr<Tokenizer> sentencepiece_tokenizer(const std::string& model_path);

// Trains a SentencePiece model (BPE, full character coverage, unknown bytes
// as byte pieces) on `documents` and writes it to model_prefix + ".model"
// (and ".vocab"); returns the .model path. Throws std::invalid_argument
// naming tokenize.vocab_size when the text cannot fill that vocabulary.
std::string train_sentencepiece(const std::vector<std::string>& documents, const std::string& model_prefix,
                                int vocab_size);

}  // namespace hp::data
