// The tokenize job (hyperpipe tokenize, Megatron's tools/preprocess_data.py):
// text files (one document per line) or JSON lines (a string field per line)
// in, a Megatron indexed dataset out (data/indexed_dataset.hpp), each
// document encoded with a SentencePiece model (or first training one on the
// input) and followed by the end-of-document token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hp::data {

struct TokenizeOptions {
  std::vector<std::string> inputs;  // --input FILE...
  std::string output_prefix;        // --output-prefix: PREFIX.bin, PREFIX.idx (and PREFIX.model when trained)
  std::string json_key;             // --json-key: "" = plain text, one document per line
  std::string tokenizer_model;      // --tokenizer-model; "" = train one of vocab_size pieces
  int vocab_size = 8000;            // --vocab-size, for the model trained
  int workers = 0;                  // --workers: encoding threads; 0 = the machine's cores
};

struct TokenizeProgress {
  std::int64_t bytes = 0, documents = 0, tokens = 0;
  double seconds = 0;
};

struct TokenizeReport {
  std::string tokenizer_model;  // the model used (trained or given)
  std::int64_t vocab_size = 0;
  std::string dtype;            // "uint16" or "int32" (Megatron's optimal dtype)
  TokenizeProgress done;
};

// Throws std::invalid_argument naming the option ("tokenize.inputs FILE: ...",
// "tokenize.json_key text: line 3 of FILE ...") before anything is written
// under the output prefix. `progress` is called about once a second.
TokenizeReport tokenize(const TokenizeOptions& o,
                        const std::function<void(const TokenizeProgress&)>& progress = nullptr);

}  // namespace hp::data
