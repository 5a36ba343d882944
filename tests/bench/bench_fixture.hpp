// A small GPT task for the bench engine's tests (one process).
#pragma once

#include <memory>

#include "runtime/pipeline.hpp"
#include "train/gpt_task.hpp"

namespace hp::bench::testing {

inline std::unique_ptr<train::GptTask> small_gpt(int layers = 4) {
  train::GptTaskOptions o;
  o.model.num_layers = layers;
  o.model.hidden_size = 16;
  o.model.num_attention_heads = 2;
  o.model.max_seq_len = 16;
  o.data.seq_len = 16;
  o.data.micro_batch_size = 2;
  return std::make_unique<train::GptTask>(o);
}

// Every micro-batch of batch 0, whole.
inline std::vector<runtime::MicroBatch> whole_batch(const train::Task& task, int micro_batches) {
  runtime::Reads all{{}, true, true};
  for (int m = 0; m < micro_batches; ++m) all.input_micros.push_back(m);
  return task.batch(0, micro_batches, all);
}

}  // namespace hp::bench::testing
