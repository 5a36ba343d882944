#include "model/vision.hpp"

#include <torch/nn/modules/container/moduledict.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "model/emulated_device.hpp"
#include "model/gpt.hpp"
#include "model/layers.hpp"

namespace hp::model {
namespace {

[[noreturn]] void bad_vision(const std::string& msg) { throw std::invalid_argument(msg); }

// The text config with the tower's widths: what the shared MLP and LayerNorm
// building blocks are built from.
TransformerConfig block_config(const VisionConfig& v, const TransformerConfig& text) {
  TransformerConfig c = text;
  c.hidden_size = v.hidden_size;
  c.num_attention_heads = v.num_attention_heads;
  c.ffn_hidden_size = v.ffn_hidden_size;
  c.enable_mhc_connections = false;  // multi-stream residuals are the text body's
  return c;
}

}  // namespace

void VisionConfig::validate() const {
  auto positive = [](const char* flag, int v) {
    if (v < 1) bad_vision(std::string(flag) + " must be a positive integer, got " + std::to_string(v));
  };
  positive("vision.num_layers", num_layers);
  positive("vision.image_size", image_size);
  positive("vision.patch_size", patch_size);
  positive("vision.hidden_size", hidden_size);
  positive("vision.num_attention_heads", num_attention_heads);
  if (image_size % patch_size != 0)
    bad_vision("vision.patch_size " + std::to_string(patch_size) + " must divide vision.image_size " + std::to_string(image_size));
  if (image_size < 4 || image_size % 2 != 0)
    bad_vision("vision.image_size must be even and >= 4 (the synthetic shapes fill image quadrants), got " +
         std::to_string(image_size));
  if (hidden_size % num_attention_heads != 0)
    bad_vision("vision.num_attention_heads " + std::to_string(num_attention_heads) + " must divide vision.hidden_size " +
         std::to_string(hidden_size));
  if (ffn_hidden_size < 0) bad_vision("the vision MLP width must be >= 0 (0 = 4 x vision.hidden_size)");
}

// Pre-norm ViT block: bidirectional attention (every patch sees every
// patch), then the MLP; same submodule names as the text blocks.
class VisionBlockImpl : public torch::nn::Module {
 public:
  explicit VisionBlockImpl(const TransformerConfig& c)
      : heads_(c.num_attention_heads), head_dim_(c.head_dim()), emulate_(c.emulate) {
    if (emulate_.replace_math) return;
    const auto dtype = to_scalar_type(c.dtype);
    attn_norm_ = register_module("attn_norm", std::make_shared<LayerNorm>(c.hidden_size, c.layernorm_eps, dtype));
    auto attention = register_module("attention", std::make_shared<torch::nn::Module>("attention"));
    qkv_ = attention->register_module("qkv", std::make_shared<Linear>(c.hidden_size, 3 * c.hidden_size, true, dtype));
    proj_ = attention->register_module("proj", std::make_shared<Linear>(c.hidden_size, c.hidden_size, true, dtype));
    mlp_norm_ = register_module("mlp_norm", std::make_shared<LayerNorm>(c.hidden_size, c.layernorm_eps, dtype));
    mlp_ = register_module("mlp", std::make_shared<MLP>(c));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    if (!emulate_.active()) return compute(x);
    return emulated_delay(emulate_.replace_math ? x : compute(x), emulate_.forward_ms, emulate_.backward_ms);
  }

 private:
  torch::Tensor compute(const torch::Tensor& x) {
    const int64_t batch = x.size(0), seq = x.size(1), hidden = x.size(2);
    const auto h = attn_norm_->forward(x);
    // unbind: one stacked gradient for the three, as in model/layers.cpp's attention.
    const auto qkv = qkv_->forward(h).view({batch, seq, 3, heads_, head_dim_}).permute({2, 0, 3, 1, 4}).unbind(0);
    const auto scores = at::matmul(qkv[0], qkv[1].transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim_)));
    const auto y = at::matmul(at::softmax(scores, -1), qkv[2]).transpose(1, 2).reshape({batch, seq, hidden});
    const auto r = x + proj_->forward(y);
    return r + mlp_->forward(mlp_norm_->forward(r));
  }

  int64_t heads_, head_dim_;
  EmulatedLayer emulate_;
  std::shared_ptr<LayerNorm> attn_norm_, mlp_norm_;
  std::shared_ptr<Linear> qkv_, proj_;
  std::shared_ptr<MLP> mlp_;
};

VisionTower::VisionTower(const VisionConfig& vision, const TransformerConfig& text, int begin, int end)
    : vision_(vision), text_(text), begin_(begin), end_(end) {
  vision.validate();
  text.validate();
  if (begin < 0 || begin >= end || end > vision.num_layers)
    bad_vision("vision tower blocks [" + std::to_string(begin) + ", " + std::to_string(end) +
         ") must be a non-empty range within vision.num_layers " + std::to_string(vision.num_layers));
  const auto dtype = to_scalar_type(text.dtype);
  const int p = vision.patch_size, dv = vision.hidden_size;
  auto root = register_module("vision", std::make_shared<torch::nn::Module>("vision"));
  if (begin == 0) {
    patch_embed_ = root->register_module(
        "patch_embed", std::make_shared<Linear>(VisionConfig::kChannels * p * p, dv, true, dtype));
    position_ = root->register_module("position", std::make_shared<Embedding>(vision.num_patches(), dv, dtype));
  }
  auto blocks = root->register_module("blocks", torch::nn::ModuleDict());
  const TransformerConfig bc = block_config(vision, text);
  for (int i = begin; i < end; ++i) {
    auto block = std::make_shared<VisionBlockImpl>(bc);
    blocks->update({{std::to_string(i), block}});
    blocks_.push_back(block);
  }
  if (end == vision.num_layers) {
    auto projector = root->register_module("projector", std::make_shared<torch::nn::Module>("projector"));
    projector_norm_ = projector->register_module("norm", std::make_shared<LayerNorm>(dv, text.layernorm_eps, dtype));
    projector_fc_ = projector->register_module("fc", std::make_shared<Linear>(dv, text.hidden_size, true, dtype));
  }
  at::NoGradGuard no_grad;
  for (auto& item : named_parameters(/*recurse=*/true)) {
    item.value().copy_(initial_parameter_value(item.key(), item.value().sizes(), text_));
    if (vision.frozen) item.value().requires_grad_(false);
  }
}

torch::Tensor VisionTower::forward(const torch::Tensor& input) {
  const auto want = input_spec(input.defined() ? input.size(0) : 0);
  if (!input.defined() || input.scalar_type() != want.dtype || input.sizes().vec() != want.shape) {
    std::string got = input.defined() ? std::string(c10::toString(input.scalar_type())) + " [" : "undefined [";
    for (int64_t d = 0; input.defined() && d < input.dim(); ++d) got += (d ? ", " : "") + std::to_string(input.size(d));
    std::string shape;
    for (size_t d = 1; d < want.shape.size(); ++d) shape += ", " + std::to_string(want.shape[d]);
    bad_vision("vision tower blocks [" + std::to_string(begin_) + ", " + std::to_string(end_) + ") expect " +
         (begin_ == 0 ? "pixels " : "features ") + c10::toString(want.dtype) + " [rows" + shape + "], got " + got +
         "]");
  }
  torch::Tensor x = input;
  if (begin_ == 0) {
    const int64_t rows = x.size(0), p = vision_.patch_size, n = vision_.image_size / p;
    // [rows, C, n, p, n, p] -> [rows, n, n, C, p, p]: one flattened patch per token, row-major.
    x = x.view({rows, VisionConfig::kChannels, n, p, n, p})
            .permute({0, 2, 4, 1, 3, 5})
            .reshape({rows, n * n, VisionConfig::kChannels * p * p});
    x = patch_embed_->forward(x) + position_->weight;
  }
  for (auto& block : blocks_) x = block->forward(x);
  if (projector_fc_) x = projector_fc_->forward(projector_norm_->forward(x));
  return x;
}

TensorSpec VisionTower::input_spec(std::int64_t rows) const {
  const auto dtype = to_scalar_type(text_.dtype);
  if (begin_ == 0) return {{rows, VisionConfig::kChannels, vision_.image_size, vision_.image_size}, dtype};
  return {{rows, vision_.num_patches(), vision_.hidden_size}, dtype};
}

TensorSpec VisionTower::output_spec(std::int64_t rows) const {
  const int width = end_ == vision_.num_layers ? text_.hidden_size : vision_.hidden_size;
  return {{rows, vision_.num_patches(), width}, to_scalar_type(text_.dtype)};
}

std::vector<std::pair<std::string, at::Tensor>> VisionTower::global_parameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

VisionPreprocess::VisionPreprocess(const VisionConfig& vision, const TransformerConfig& text, int transpose_blocks) {
  if (transpose_blocks < 1 || transpose_blocks > vision.num_layers)
    bad_vision("schedule.mpipe.transpose_layers " + std::to_string(transpose_blocks) +
         ": a VL preprocess transposes 1..vision.num_layers " + std::to_string(vision.num_layers) + " tower blocks");
  tower_ = std::make_shared<VisionTower>(vision, text, 0, transpose_blocks);
}

at::Tensor VisionPreprocess::forward(const at::Tensor& pixels) { return tower_->forward(pixels); }

std::vector<std::pair<std::string, at::Tensor>> VisionPreprocess::named_parameters() const {
  return tower_->global_parameters();
}

TensorSpec VisionPreprocess::input_spec(std::int64_t rows, std::int64_t) const { return tower_->input_spec(rows); }
TensorSpec VisionPreprocess::output_spec(std::int64_t rows, std::int64_t) const { return tower_->output_spec(rows); }

}  // namespace hp::model
