// LmData: language-model micro-batches from a token source (the embedded
// corpus, text or pre-tokenized files: data/token_source.hpp), the data side
// that the GPT and Hybrid tasks share. Batch `index` is micro_batch_size *
// micro_batches sequences of seq_len + 1 tokens (data::sample_batch), split
// into micro-batches of input [:, :-1] and target [:, 1:].
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/microbatch.hpp"

namespace hp::data {
class TokenSource;
}

namespace hp::train {

struct LmDataOptions {
  int micro_batch_size = 2;       // --micro-batch-size: sequences per micro-batch
  int seq_len = 32;               // --seq-len
  std::string data = "embedded";  // --data
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
  std::vector<runtime::MicroBatch> batch(std::int64_t index, int micro_batches, const std::vector<int>& input_micros,
                                         bool targets, std::uint64_t seed) const;
  const LmDataOptions& options() const { return options_; }
  // "micro-batch-size=2 seq-len=32", for banners.
  std::string describe() const;

 private:
  LmDataOptions options_;
  std::unique_ptr<data::TokenSource> source_;
};

}  // namespace hp::train
