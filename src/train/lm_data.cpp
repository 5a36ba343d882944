#include "train/lm_data.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

#include "data/batch_sampler.hpp"
#include "data/token_source.hpp"
#include "model/gpt_stages.hpp"
#include "train/task.hpp"

namespace hp::train {

LmData::LmData(LmDataOptions options) : options_(std::move(options)), source_(data::open_source(options_.data)) {}

LmData::~LmData() = default;

void LmData::validate(int vocab, int positions, int mtp_depth) const {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  const auto& o = options_;
  if (o.micro_batch_size < 1) fail("--micro-batch-size must be >= 1, got " + std::to_string(o.micro_batch_size));
  if (o.seq_len < 1) fail("--seq-len must be >= 1, got " + std::to_string(o.seq_len));
  if (o.seq_len > positions)
    fail("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's position table (" +
         std::to_string(positions) + ")");
  if (o.seq_len <= mtp_depth)
    fail("--seq-len " + std::to_string(o.seq_len) + " leaves no position for multi-token prediction " +
         std::to_string(mtp_depth) + " tokens ahead; use a --seq-len above " + std::to_string(mtp_depth));
  if (source_->vocab_size() > vocab)
    fail("--data " + o.data + " has token ids up to " + std::to_string(source_->vocab_size() - 1) +
         " but --vocab is " + std::to_string(vocab));
  if (source_->size() < static_cast<std::size_t>(o.seq_len) + 1)
    fail("--data " + o.data + " is shorter than --seq-len + 1 tokens");
}

std::vector<runtime::MicroBatch> LmData::batch(std::int64_t index, int micro_batches,
                                               const std::vector<int>& input_micros, bool targets,
                                               std::uint64_t seed) const {
  data::BatchOptions b;
  b.batch_size = options_.micro_batch_size * micro_batches;
  b.seq_len = options_.seq_len;
  b.seed = seed;
  const data::Batch batch = data::sample_batch(*source_, b, index);
  const at::Tensor tokens = at::tensor(batch.tokens, at::kLong).view({batch.batch_size, batch.seq_len + 1});
  auto micros = model::lm_micro_batches(runtime::split_microbatches(tokens, micro_batches));
  keep_what_is_read(micros, input_micros, targets);
  return micros;
}

std::string LmData::describe() const {
  return "micro-batch-size=" + std::to_string(options_.micro_batch_size) + " seq-len=" + std::to_string(options_.seq_len);
}

}  // namespace hp::train
