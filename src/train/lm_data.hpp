// LmData: language-model micro-batches from a corpus (the embedded corpus,
// text or pre-tokenized files: data/token_source.hpp; Megatron's indexed
// datasets and blends: data/megatron_data.hpp), the data side that the GPT
// and Hybrid tasks share. Batch `index` is micro_batch_size * micro_batches
// sequences of seq_len + 1 tokens (data::Corpus::batch), split into
// micro-batches of input [:, :-1] and target [:, 1:].
//
// Held-out data: the embedded corpus keeps its last sixteenth for evaluation,
// which training never reads (with or without --eval-interval, so a run's
// training curve does not depend on it); a Megatron dataset's validation part
// (--split) is its held-out data; --eval-data names held-out tokens of any
// source (and is required for other file --data to evaluate).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/microbatch.hpp"

namespace hp::data {
class Corpus;
}

namespace hp::train {

struct LmDataOptions {
  int micro_batch_size = 2;       // --micro-batch-size: sequences per micro-batch
  int seq_len = 32;               // --seq-len
  std::string data = "embedded";  // --data
  std::string eval_data;          // --eval-data; "" = the embedded corpus's held-out tail
  std::string split;              // --split over a Megatron dataset's documents; "" = 969,30,1
  // --tokenizer-model: the SentencePiece model the data was tokenized with;
  // the vocabulary comes from it and checkpoints record it for generate.
  std::string tokenizer_model;
  // --variable-seq-len: micro-batch m of a batch holds sequences of its own
  // length L_m, drawn from [seq_len / 2, seq_len] by (seed, batch, m), as
  // documents cut at different boundaries would; the pipeline must ship
  // shapes with every message (runtime::ExecutorOptions::variable_seq_len).
  bool variable_seq_len = false;
};

class LmData {
 public:
  // Opens the source; throws std::invalid_argument naming --data.
  explicit LmData(LmDataOptions options);
  ~LmData();

  // Against a model of `vocab` tokens and `positions` positions whose
  // multi-token prediction looks `mtp_depth` tokens further; throws
  // std::invalid_argument naming the flag.
  void validate(int vocab, int positions, int mtp_depth = 0) const;
  // Only what the rank reads is kept (train::keep_what_is_read).
  std::vector<runtime::MicroBatch> batch(std::int64_t index, int micro_batches, const runtime::Reads& reads,
                                         std::uint64_t seed) const;
  // The sequence length of micro-batch m of batch `index` (seq_len unless
  // variable_seq_len).
  int seq_len_of(std::int64_t index, int micro_batches, int m, std::uint64_t seed) const;
  // Held-out batch `index`, the same at every evaluation; throws
  // std::invalid_argument naming --eval-data when there is no held-out data.
  std::vector<runtime::MicroBatch> eval_batch(std::int64_t index, int micro_batches, const runtime::Reads& reads,
                                              std::uint64_t seed) const;
  bool has_eval_data() const { return eval_ != nullptr; }
  // Tokens taken from the sources so far (by batch and eval_batch): a rank
  // that reads nothing of a batch takes none.
  std::int64_t tokens_read() const { return tokens_read_; }
  const LmDataOptions& options() const { return options_; }
  // "micro-batch-size=2 seq-len=32", for banners.
  std::string describe() const;

 private:
  std::vector<runtime::MicroBatch> sample(const data::Corpus& source, std::int64_t index, int micro_batches,
                                          const runtime::Reads& reads, std::uint64_t seed) const;

  mutable std::atomic<std::int64_t> tokens_read_{0};
  LmDataOptions options_;
  std::shared_ptr<const data::Corpus> train_;
  std::shared_ptr<const data::Corpus> eval_;  // null: no held-out data
};

}  // namespace hp::train
