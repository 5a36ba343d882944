#include "infer/decoder.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "comm/process_group.hpp"

namespace hp::infer {
namespace {

schedule::ScheduleOptions forward_only(schedule::ScheduleOptions layout) {
  layout.forward_only = true;
  return layout;
}

}  // namespace

Decoder::Decoder(schedule::ScheduleOptions layout, int rank, comm::ProcessGroup* pg, DecodeModel model)
    : layout_(forward_only(layout)), rank_(rank), pg_(pg), model_(std::move(model)) {
  runtime::PipelineOptions o;
  o.schedule = layout_;
  pipeline_ = std::make_unique<runtime::Pipeline>(o, rank, pg, model_.stages);
}

Decoder::~Decoder() = default;

void check_generate(const std::vector<std::vector<std::int64_t>>& prompts, const GenerateOptions& options,
                    std::int64_t vocab_size, std::int64_t max_positions) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  options.sampling.validate();
  if (options.max_new_tokens < 1) fail("generate.max_new_tokens must be >= 1, got " + std::to_string(options.max_new_tokens));
  if (prompts.empty()) fail("generate.prompts: no prompt given");
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& prompt = prompts[p];
    const std::string which = "generate.prompts: prompt " + std::to_string(p + 1);
    if (prompt.empty()) fail(which + " is empty");
    for (std::int64_t id : prompt)
      if (id < 0 || id >= vocab_size)
        fail(which + " holds token " + std::to_string(id) + ", outside the model's vocabulary of " +
             std::to_string(vocab_size));
    const std::int64_t room = max_positions - static_cast<std::int64_t>(prompt.size());
    if (options.max_new_tokens > room)
      fail("generate.max_new_tokens " + std::to_string(options.max_new_tokens) + ": prompt " + std::to_string(p + 1) +
           " has " + std::to_string(prompt.size()) + " tokens and the model holds " + std::to_string(max_positions) +
           " positions, so at most " + std::to_string(std::max<std::int64_t>(room, 0)) + " new tokens fit");
  }
}

std::vector<std::vector<std::int64_t>> Decoder::generate(const std::vector<std::vector<std::int64_t>>& prompts,
                                                         const GenerateOptions& options) {
  check_generate(prompts, options, model_.vocab_size, model_.max_positions);
  const int mb = layout_.micro_batches;
  if (static_cast<int>(prompts.size()) != mb)
    throw std::invalid_argument("generate.prompts: " + std::to_string(prompts.size()) + " prompts for a layout of " +
                                std::to_string(mb) + " micro-batches (schedule.micro_batches)");
  const bool reads_input = !pipeline_->input_micros().empty();
  Sampler sampler(options.sampling);
  std::vector<std::vector<std::int64_t>> sequences = prompts;
  std::vector<std::vector<std::int64_t>> generated(mb);
  std::vector<std::int64_t> cached(mb, 0);  // positions the stages have cached per micro
  for (int t = 0; t < options.max_new_tokens; ++t) {
    std::vector<runtime::MicroBatch> micros(mb);
    for (int m = 0; m < mb; ++m) {
      const std::int64_t start = options.kv_cache ? cached[m] : 0;
      const std::int64_t length = static_cast<std::int64_t>(sequences[m].size()) - start;
      model_.begin(m, start, length);
      micros[m].extra = at::full({1}, m, at::kLong);
      if (reads_input)
        micros[m].input = at::tensor(std::vector<std::int64_t>(sequences[m].begin() + start, sequences[m].end()),
                                     at::kLong)
                              .view({1, length});
      cached[m] = static_cast<std::int64_t>(sequences[m].size());
    }
    const std::vector<at::Tensor> logits = pipeline_->forward(micros);
    at::Tensor next = at::zeros({mb}, at::kLong);
    if (pipeline_->reads_targets())
      for (int m = 0; m < mb; ++m) next[m] = sampler.next(logits.at(m).select(1, -1))[0];
    if (pg_ && pg_->world_size() > 1) pg_->broadcast({next}, pg_->world_size() - 1);
    for (int m = 0; m < mb; ++m) {
      const std::int64_t id = next[m].item<std::int64_t>();
      sequences[m].push_back(id);
      generated[m].push_back(id);
    }
  }
  return generated;
}

}  // namespace hp::infer
