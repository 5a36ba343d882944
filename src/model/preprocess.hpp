// Preprocess: the block of a model that MPipe Transpose runs on idle ranks
// (spec section 2, D2/D3). It is a standalone module, built on EVERY rank with
// the same structure: on rank 0 it holds the trained parameters, elsewhere a
// replica that the MPIPE_PARAM_BROADCAST step overwrites. Its parameters keep
// the model's global names ("embedding.word.weight", "layers.0.mlp.fc1.bias",
// "vision.blocks.0...."), so checkpoints and the optimizer see no difference
// from an unsplit stage 0.
//
// Contract: forward() is a plain autograd function of its input and the
// parameters (grad mode decides whether it records a graph); it never modifies
// its input and returns a new tensor. named_parameters() lists the same
// tensors in the same order on every call. Single-threaded.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/transformer_config.hpp"
#include "runtime/rank_model.hpp"

namespace hp::model {

class GPTChunk;

using runtime::TensorSpec;

class Preprocess {
 public:
  virtual ~Preprocess() = default;
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  virtual std::vector<std::pair<std::string, at::Tensor>> named_parameters() const = 0;
  // What forward() takes and returns for a micro-batch of `rows` samples with
  // `seq` text tokens each (the receiver allocates its buffers from these).
  virtual TensorSpec input_spec(std::int64_t rows, std::int64_t seq) const = 0;
  virtual TensorSpec output_spec(std::int64_t rows, std::int64_t seq) const = 0;
};

// The preprocess as the runtime takes it (runtime::Preprocess): it shares the
// module. rows > 0 and seq > 0: every micro-batch has that many rows and
// tokens, so the transported shapes are given; otherwise the runtime learns
// them on the first step.
std::shared_ptr<runtime::Preprocess> runtime_preprocess(std::shared_ptr<Preprocess> module, std::int64_t rows = 0,
                                                        std::int64_t seq = 0);

// GPT's preprocess for T >= 1: the token and position embeddings plus decoder
// layers [0, T), i.e. GPTChunk(ChunkLayout{stage 0, embedding, layers [0, T)}).
// tokens int64 [rows, seq] -> hidden [rows, seq, hidden]. Throws
// std::invalid_argument unless 1 <= T < config.num_layers.
class GPTPreprocess : public Preprocess {
 public:
  GPTPreprocess(const TransformerConfig& config, int transpose_layers);
  at::Tensor forward(const at::Tensor& tokens) override;
  std::vector<std::pair<std::string, at::Tensor>> named_parameters() const override;
  TensorSpec input_spec(std::int64_t rows, std::int64_t seq) const override;
  TensorSpec output_spec(std::int64_t rows, std::int64_t seq) const override;
  const std::shared_ptr<GPTChunk>& chunk() const { return chunk_; }

 private:
  std::shared_ptr<GPTChunk> chunk_;
};

}  // namespace hp::model
