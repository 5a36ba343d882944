#include "model/preprocess.hpp"

#include <stdexcept>

#include "model/gpt.hpp"
#include "model/layers.hpp"

namespace hp::model {

GPTPreprocess::GPTPreprocess(const TransformerConfig& config, int transpose_layers) {
  if (transpose_layers < 1 || transpose_layers >= config.num_layers)
    throw std::invalid_argument("schedule.mpipe.transpose_layers " + std::to_string(transpose_layers) +
                                ": a GPT preprocess needs 1 <= T < model.num_layers " + std::to_string(config.num_layers));
  ChunkLayout layout;
  layout.stage = 0;
  layout.embedding = true;
  layout.head = false;
  layout.layer_begin = 0;
  layout.layer_end = transpose_layers;
  chunk_ = std::make_shared<GPTChunk>(config, layout);
}

at::Tensor GPTPreprocess::forward(const at::Tensor& tokens) { return chunk_->forward(tokens); }

std::vector<std::pair<std::string, at::Tensor>> GPTPreprocess::named_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : chunk_->named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

TensorSpec GPTPreprocess::input_spec(std::int64_t rows, std::int64_t seq) const {
  return {{rows, seq}, at::kLong};
}

TensorSpec GPTPreprocess::output_spec(std::int64_t rows, std::int64_t seq) const {
  const auto& c = chunk_->config();
  return {{rows, c.local_seq(seq), c.residual_width()}, chunk_->activation_dtype()};
}

std::shared_ptr<runtime::Preprocess> runtime_preprocess(std::shared_ptr<Preprocess> module, std::int64_t rows,
                                                        std::int64_t seq) {
  auto out = std::make_shared<runtime::Preprocess>();
  out->forward = [module](const at::Tensor& x) { return module->forward(x); };
  out->parameters = module->named_parameters();
  if (rows > 0 && seq > 0) {
    out->input_spec = [module, rows, seq](int) { return module->input_spec(rows, seq); };
    out->output_spec = [module, rows, seq](int) { return module->output_spec(rows, seq); };
  }
  return out;
}

}  // namespace hp::model
