#include "train/lm_data.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "data/corpus.hpp"
#include "data/megatron_data.hpp"
#include "data/rng.hpp"
#include "data/token_source.hpp"
#include "model/gpt_stages.hpp"
#include "train/task.hpp"

namespace hp::train {

namespace {

// The embedded corpus's held-out tail: 1/16 of it (64 KiB of the 1 MiB).
constexpr std::size_t kHeldOutFraction = 16;

// --eval-data: every document of a Megatron dataset, or random windows of tokens.
std::shared_ptr<const data::Corpus> open_eval_source(const std::string& spec, int seq_len) {
  try {
    if (data::is_megatron_data(spec)) return data::open_megatron_data(spec, "1,0,0", seq_len)[0];
    return data::random_windows(data::open_source(spec));
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    if (m.rfind("data.data", 0) == 0) m = "data.eval_data" + m.substr(9);
    throw std::invalid_argument(m);
  }
}

}  // namespace

LmData::LmData(LmDataOptions options) : options_(std::move(options)) {
  if (data::is_megatron_data(options_.data)) {
    auto parts = data::open_megatron_data(options_.data, options_.split, options_.seq_len);
    train_ = parts[0];
    eval_ = parts[1];
  } else {
    if (!options_.split.empty())
      throw std::invalid_argument("data.split " + options_.split +
                                  " divides the documents of a Megatron indexed dataset (data.data PREFIX or a "
                                  "blend), and data.data " + options_.data + " is not one; drop data.split");
    std::shared_ptr<const data::TokenSource> source = data::open_source(options_.data);
    if (options_.data == "embedded" || options_.data.empty()) {
      const std::size_t n = source->size(), held_out = n / kHeldOutFraction;
      train_ = data::random_windows(data::slice_source(source, 0, n - held_out));
      eval_ = data::random_windows(data::slice_source(source, n - held_out, n));
    } else {
      train_ = data::random_windows(std::move(source));
    }
  }
  if (!options_.eval_data.empty()) eval_ = open_eval_source(options_.eval_data, options_.seq_len);
}

LmData::~LmData() = default;

void LmData::validate(int vocab, int positions, int mtp_depth) const {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  const auto& o = options_;
  if (o.micro_batch_size < 1) fail("data.micro_batch_size must be >= 1, got " + std::to_string(o.micro_batch_size));
  if (o.seq_len < 1) fail("data.seq_len must be >= 1, got " + std::to_string(o.seq_len));
  if (o.seq_len > positions)
    fail("data.seq_len " + std::to_string(o.seq_len) + " exceeds the model's position table (" +
         std::to_string(positions) + ")");
  if (o.seq_len <= mtp_depth)
    fail("data.seq_len " + std::to_string(o.seq_len) + " leaves no position for multi-token prediction " +
         std::to_string(mtp_depth) + " tokens ahead; use a data.seq_len above " + std::to_string(mtp_depth));
  auto check = [&](const data::Corpus& src, const std::string& flag, const std::string& spec) {
    if (src.vocab_size() > vocab)
      fail(flag + " " + spec + " has token ids up to " + std::to_string(src.vocab_size() - 1) + " but model.vocab_size is " +
           std::to_string(vocab));
    if (src.longest_row() < static_cast<std::size_t>(o.seq_len) + 1)
      fail(flag + " " + spec + " is shorter than data.seq_len + 1 tokens");
  };
  check(*train_, "data.data", o.data);
  if (eval_) check(*eval_, "data.eval_data", o.eval_data.empty() ? "(the embedded corpus's held-out tail)" : o.eval_data);
}

int LmData::seq_len_of(std::int64_t index, int micro_batches, int m, std::uint64_t seed) const {
  const int full = options_.seq_len;
  if (!options_.variable_seq_len) return full;
  data::SplitMix64 rng(seed ^ (0x7365716c656e ^ static_cast<std::uint64_t>(index * micro_batches + m) * 0x9e3779b97f4a7c15ULL));
  const int shortest = std::max(1, full / 2);
  return shortest + static_cast<int>(rng.next() % static_cast<std::uint64_t>(full - shortest + 1));
}

std::vector<runtime::MicroBatch> LmData::sample(const data::Corpus& source, std::int64_t index,
                                                int micro_batches, const runtime::Reads& reads,
                                                std::uint64_t seed) const {
  const int rows = options_.micro_batch_size;
  // Only the rows of the micro-batches this rank reads come from the source.
  std::vector<bool> read(static_cast<std::size_t>(rows * micro_batches), false);
  for (int m = 0; m < micro_batches; ++m)
    if (reads.targets && reads.covers(m)) std::fill(read.begin() + m * rows, read.begin() + (m + 1) * rows, true);
  for (int m : reads.input_micros) std::fill(read.begin() + m * rows, read.begin() + (m + 1) * rows, true);
  if (std::find(read.begin(), read.end(), true) == read.end()) return std::vector<runtime::MicroBatch>(micro_batches);
  data::BatchOptions b;
  b.seed = seed;
  std::vector<at::Tensor> parts;
  if (!options_.variable_seq_len) {
    b.batch_size = rows * micro_batches;
    b.seq_len = options_.seq_len;
    const data::Batch batch = source.batch(b, index, &read);
    tokens_read_ += batch.tokens_read;
    const at::Tensor tokens = at::tensor(batch.tokens, at::kLong).view({batch.batch_size, batch.seq_len + 1});
    parts = runtime::split_microbatches(tokens, micro_batches);
  } else {
    // Each micro-batch is a batch of its own length, drawn as batch
    // index * micro_batches + m.
    b.batch_size = rows;
    for (int m = 0; m < micro_batches; ++m) {
      b.seq_len = seq_len_of(index, micro_batches, m, seed);
      const std::vector<bool> mine(read.begin() + m * rows, read.begin() + (m + 1) * rows);
      const data::Batch batch = source.batch(b, index * micro_batches + m, &mine);
      tokens_read_ += batch.tokens_read;
      parts.push_back(at::tensor(batch.tokens, at::kLong).view({rows, b.seq_len + 1}));
    }
  }
  auto micros = model::lm_micro_batches(parts);
  keep_what_is_read(micros, reads);
  return micros;
}

std::vector<runtime::MicroBatch> LmData::batch(std::int64_t index, int micro_batches,
                                               const runtime::Reads& reads, std::uint64_t seed) const {
  return sample(*train_, index, micro_batches, reads, seed);
}

std::vector<runtime::MicroBatch> LmData::eval_batch(std::int64_t index, int micro_batches,
                                                    const runtime::Reads& reads, std::uint64_t seed) const {
  if (!eval_)
    throw std::invalid_argument("train.eval_interval needs held-out data: data.data " + options_.data +
                                " has none of its own (a Megatron dataset's validation part, from data.split, "
                                "holds too few tokens or none); give data.eval_data PATH");
  return sample(*eval_, index, micro_batches, reads, seed ^ kHeldOutSeedMix);
}

std::string LmData::describe() const {
  return "micro-batch-size=" + std::to_string(options_.micro_batch_size) + " seq-len=" + std::to_string(options_.seq_len);
}

}  // namespace hp::train
