// Decoder: autoregressive generation through a forward-only pipeline
// (runtime::Pipeline::forward), Megatron's static inference engine and
// torch.distributed.pipelining's eval() in one: every prompt is a
// micro-batch, so while the last rank samples one prompt's token the others
// already run the next prompts' forwards.
//
// One decoding step is one forward run over every micro: the first feeds each
// whole prompt (prefill), every later one the token sampled last (with the
// KV cache) or the whole sequence so far (without). The last rank samples
// each micro's next token (infer/sampler.hpp) and broadcasts them to every
// rank, which append them.
//
// Contract: collective; every rank constructs it with the same layout and
// calls generate() with the same prompts and options. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "infer/decode_model.hpp"
#include "infer/sampler.hpp"
#include "runtime/pipeline.hpp"

namespace hp::comm {
class ProcessGroup;
}

namespace hp::infer {

struct GenerateOptions {
  int max_new_tokens = 32;  // --max-new-tokens
  SamplingOptions sampling;
  bool kv_cache = true;     // false: recompute the whole prefix at every token (--no-kv-cache)
};

// Throws std::invalid_argument naming the option when a prompt is empty,
// holds an id outside [0, vocab_size) or leaves no room for max_new_tokens
// within max_positions, or when the sampling options are bad. Needs no model.
void check_generate(const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& options,
                    std::int64_t vocab_size, std::int64_t max_positions);

class Decoder {
 public:
  // layout.micro_batches is the number of prompts of every generate() call;
  // the decoder runs the layout's forward-only schedule. Throws
  // std::invalid_argument for a bad layout (before any communication).
  Decoder(schedule::ScheduleOptions layout, int rank, comm::ProcessGroup* pg, DecodeModel model);
  ~Decoder();

  // This rank's parameters by global name: load a checkpoint into them.
  std::map<std::string, at::Tensor> named_parameters() const { return pipeline_->named_parameters(); }

  // The new tokens of each prompt (max_new_tokens each), on every rank.
  std::vector<std::vector<std::int64_t>> generate(const std::vector<std::vector<std::int64_t>>& prompts,
                                                  const GenerateOptions& options);

 private:
  schedule::ScheduleOptions layout_;
  int rank_;
  comm::ProcessGroup* pg_;
  DecodeModel model_;
  std::unique_ptr<runtime::Pipeline> pipeline_;
};

}  // namespace hp::infer
