#include "model/hybrid.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/container/moduledict.h>

#include <stdexcept>

#include "model/gpt.hpp"
#include "model/hyper_connection.hpp"
#include "model/kv_cache.hpp"
#include "model/layers.hpp"
#include "model/loss_injection.hpp"
#include "model/mhc_recompute.hpp"
#include "model/mtp.hpp"
#include "model/tensor_parallel.hpp"

namespace hp::model {

void HybridConfig::validate() const {
  base.validate();
  HybridPattern::parse(pattern);
  if (mamba.state_size < 1) throw std::invalid_argument("model.mamba_state_size must be >= 1");
  if (mamba.conv_kernel < 1 || mamba.expand < 1) throw std::invalid_argument("the Mamba kernel and expansion must be >= 1");
  if (!(mtp_loss_scaling >= 0)) throw std::invalid_argument("model.mtp_loss_scaling must be >= 0");
  if (base.mtp_num_layers > 0)
    throw std::invalid_argument("model.mtp_num_layers: a Hybrid model's MTP depths are the / parts of "
                                "model.hybrid_pattern (e.g. M*-E/*-/*- for two)");
  const int tp = base.tensor_parallel.size;
  if (tp > 1 && (static_cast<int64_t>(mamba.expand) * base.hidden_size) % tp != 0)
    throw std::invalid_argument("model.tensor_parallel.size " + std::to_string(tp) + " must divide the Mamba mixer's " +
                                std::to_string(mamba.expand * base.hidden_size) + " channels (expand x model.hidden_size)");
  if (base.tensor_parallel.sequence_parallel)
    throw std::invalid_argument("model.tensor_parallel.sequence_parallel: a Hybrid model's Mamba mixers scan the whole "
                                "sequence; use tensor parallelism without it");
  if (base.context_parallel.size > 1)
    throw std::invalid_argument("model.context_parallel.size " + std::to_string(base.context_parallel.size) +
                                ": a Hybrid model's Mamba mixers scan the whole sequence; context parallelism is for the GPT");
  if (moe.num_experts < 1 || moe.top_k < 1 || moe.top_k > moe.num_experts)
    throw std::invalid_argument("model.moe_top_k must be in 1..model.moe_num_experts (" +
                                std::to_string(moe.num_experts) + "), got " + std::to_string(moe.top_k));
}

HybridLayer::HybridLayer(const HybridConfig& config, LayerKind kind, int index) : kind_(kind), index_(index) {
  const TransformerConfig& c = config.base;
  norm_ = register_module("norm", std::make_shared<LayerNorm>(c.hidden_size, c.layernorm_eps, to_scalar_type(c.dtype)));
  switch (kind) {
    case LayerKind::Mamba: {
      auto m = register_module("mixer", std::make_shared<MambaMixer>(c, config.mamba));
      mix_ = [m, index](const torch::Tensor& u, KVCache* cache) {
        return m->forward(u, cache ? &cache->mamba[index] : nullptr);
      };
      break;
    }
    case LayerKind::Attention: {
      auto m = register_module("mixer", std::make_shared<CausalSelfAttention>(c));
      mix_ = [m, index](const torch::Tensor& u, KVCache* cache) {
        return m->forward(u, cache ? &cache->layers[index] : nullptr);
      };
      break;
    }
    case LayerKind::MLP: {  // per position: nothing to cache
      auto m = register_module("mixer", std::make_shared<MLP>(c));
      mix_ = [m](const torch::Tensor& u, KVCache*) { return m->forward(u); };
      break;
    }
    case LayerKind::MoE: {
      MoEOptions moe = config.moe;
      moe.aux_loss_scale = config.aux_loss_scale;
      auto m = register_module("mixer", std::make_shared<MixtureOfExperts>(c, moe));
      mix_ = [m](const torch::Tensor& u, KVCache*) { return m->forward(u); };
      break;
    }
  }
  if (c.enable_mhc_connections) hc_ = register_module("hc", std::make_shared<HyperConnection>(c));
}

void HybridLayer::set_mhc_recompute(bool on) {
  if (hc_) hc_->set_recompute(on);
}

torch::Tensor HybridLayer::forward(const torch::Tensor& x, KVCache* cache) {
  if (cache && index_ < 0) throw std::logic_error("a Hybrid layer without a global index cannot decode");
  auto sublayer = [this, cache](const torch::Tensor& u) { return mix_(norm_->forward(u), cache); };
  return hc_ ? hc_->forward(x, sublayer) : x + sublayer(x);
}

LearnedContraction::LearnedContraction(const TransformerConfig& config)
    : streams_(config.mhc_num_residual_streams),
      width_(config.hidden_size),
      eps_(config.layernorm_eps),
      seed_(config.seed),
      dtype_(to_scalar_type(config.dtype)) {
  const auto opts = at::TensorOptions().dtype(dtype_);
  scale = register_parameter("scale", at::ones({1}, opts));
  weight = register_parameter("weight", at::zeros({streams_, streams_ * width_}, opts));
  base = register_parameter("base", at::zeros({streams_}, opts));
}

std::map<std::string, ParamInit> LearnedContraction::own_inits() const {
  // Megatron's hc_head_fn xavier-uniform, hc_head_scale 1, hc_head_base 0.
  return {{"weight", xavier_uniform_init(seed_, dtype_)},
          {"scale", constant_init(1.0, dtype_)},
          {"base", constant_init(0.0, dtype_)}};
}

torch::Tensor LearnedContraction::forward(const torch::Tensor& x) {
  // At least float32, whatever the model's precision.
  const auto compute = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  std::vector<int64_t> split = x.sizes().vec();
  split.back() = streams_;
  split.push_back(width_);
  const auto xs = x.to(compute).reshape(split);                                        // [..., n, C]
  const auto rms = at::rsqrt(x.to(compute).pow(2).mean(-1, /*keepdim=*/true) + eps_);  // [..., 1]
  const auto score = scale.to(compute) * at::matmul(x.to(compute), weight.to(compute).t()) * rms + base.to(compute);
  const auto gate = at::sigmoid(score) + eps_;                                         // [..., n]
  return (gate.unsqueeze(-1) * xs).sum(-2).to(x.scalar_type());
}

HybridChunk::HybridChunk(const HybridConfig& config, int begin, int end, bool first, bool last)
    : config_(config), first_(first), last_(last) {
  config.validate();
  const TransformerConfig& c = config.base;
  const HybridPattern pattern = HybridPattern::parse(config.pattern);
  if (begin < 0 || begin > end || end > static_cast<int>(pattern.layers.size()))
    throw std::invalid_argument("hybrid chunk layers [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") must lie within the pattern's " + std::to_string(pattern.layers.size()) +
                                " decoder layers");
  const auto dtype = to_scalar_type(c.dtype);
  const bool mtp = last_ && pattern.mtp_depth > 0;
  if (first_ || mtp) {
    auto embedding = register_module("embedding", std::make_shared<torch::nn::Module>("embedding"));
    word_ = embedding->register_module(
        "word", std::make_shared<VocabParallelEmbedding>(c.vocab_size, c.hidden_size, dtype, c.tensor_parallel));
    if (first_)
      position_ = embedding->register_module("position", std::make_shared<Embedding>(c.max_seq_len, c.hidden_size, dtype));
  }
  auto layers = register_module("layers", torch::nn::ModuleDict());
  for (int i = begin; i < end; ++i) {
    layers_.push_back(std::make_shared<HybridLayer>(config, pattern.layers[i], i));
    layers_.back()->set_mhc_recompute(c.recomputes_mhc());
    layers->update({{std::to_string(i), layers_.back()}});
  }
  if (last_) {
    if (c.enable_mhc_connections) contraction_ = register_module("final_contraction", std::make_shared<LearnedContraction>(c));
    final_norm_ = register_module("final_norm", std::make_shared<LayerNorm>(c.hidden_size, c.layernorm_eps, dtype));
    lm_head_ = register_module("lm_head", std::make_shared<ColumnParallelLinear>(c.hidden_size, c.vocab_size, false,
                                                                                 dtype, c.tensor_parallel));
  }
  if (mtp) {
    auto make_layers = [&config, &pattern](int) {
      std::vector<MtpLayer> layers;
      for (LayerKind kind : pattern.mtp_layers) {
        auto layer = std::make_shared<HybridLayer>(config, kind);
        layer->set_mhc_recompute(config.base.recomputes_mhc());
        layers.push_back({layer, [layer](const torch::Tensor& x) { return layer->forward(x); }});
      }
      return layers;
    };
    auto make_contraction = [&c](int) {
      auto k = std::make_shared<LearnedContraction>(c);
      return MtpLayer{k, [k](const torch::Tensor& x) { return k->forward(x); }};
    };
    MtpOptions mtp_options;
    mtp_options.depth = pattern.mtp_depth;
    mtp_options.loss_scaling = config.mtp_loss_scaling;
    mtp_options.carry_streams = c.enable_mhc_connections;  // Megatron's MTP with hyper-connections
    mtp_ = register_module("mtp", std::make_shared<MultiTokenPrediction>(c, mtp_options, make_layers, make_contraction));
  }
  initialize_parameters(*this, c.tensor_parallel, [&c](const std::string& name, at::IntArrayRef shape) {
    return hybrid_initial_value(name, shape, c);
  });
}

torch::Tensor HybridChunk::forward(const torch::Tensor& input, const torch::Tensor& target) {
  return run(input, target, nullptr);
}

torch::Tensor HybridChunk::decode(const torch::Tensor& input, KVCache& cache) {
  torch::Tensor x = run(input, torch::Tensor(), &cache);
  cache.positions += input.size(1);
  return x;
}

torch::Tensor HybridChunk::run(const torch::Tensor& input, const torch::Tensor& target, KVCache* cache) {
  const TransformerConfig& c = config_.base;
  const int64_t offset = cache ? cache->positions : 0;
  if (input.dim() >= 2 && offset + input.size(1) > c.max_seq_len)
    throw std::invalid_argument("the Hybrid model holds model.max_seq_len " + std::to_string(c.max_seq_len) +
                                " positions; " + std::to_string(offset) + " cached + " + std::to_string(input.size(1)) +
                                " new do not fit");
  torch::Tensor x = input;
  if (first_) {
    if (input.scalar_type() != at::kLong || input.dim() != 2)
      throw std::invalid_argument("the Hybrid model's first stage takes int64 token ids [batch, seq <= " +
                                  std::to_string(c.max_seq_len) + "]");
    x = word_->forward(input) + position_->weight.narrow(0, offset, input.size(1));
    if (c.enable_mhc_connections) x = expand_streams(x, c.mhc_num_residual_streams);
  } else if (input.dim() != 3 || input.size(2) != c.residual_width()) {
    throw std::invalid_argument("a Hybrid stage takes [batch, seq, " + std::to_string(c.residual_width()) +
                                "] (model.hidden_size x streams)");
  }
  {
    MhcRecomputeScope groups(c.mhc_recompute_layer_num, c.recomputes_mhc() && !cache);
    for (size_t i = 0; i < layers_.size(); ++i) {
      x = layers_[i]->forward(x, cache);
      groups.layer_done(x, i + 1 == layers_.size());
    }
  }
  if (last_) {
    const torch::Tensor streams = x;  // with mHC, MTP takes the decoder's streams before the contraction
    if (contraction_) x = contraction_->forward(x);
    const torch::Tensor hidden = x;
    auto lm_head = [this](const torch::Tensor& h) { return lm_head_->forward(h); };
    auto head = [this](const torch::Tensor& h) { return lm_head_->forward(final_norm_->forward(h)); };
    x = head(hidden);
    if (mtp_ && !cache) {  // decoding predicts the next token only
      if (!target.defined()) throw std::invalid_argument("the Hybrid model's MTP needs the micro-batch's target");
      auto embed = [this](const torch::Tensor& ids) { return word_->forward(ids); };
      auto m = contraction_ ? mtp_->losses(streams, target, embed, lm_head) : mtp_->losses(hidden, target, embed, head);
      x = inject_loss(x, m.total, config_.aux_loss_scale);
    }
  }
  // An empty middle stage: an independent, graph-connected output, so the
  // schedule can pseudo-deallocate it without touching the received input.
  if (x.is_same(input)) x = input.clone();
  return x;
}

torch::Tensor hybrid_initial_value(const std::string& name, at::IntArrayRef shape, const TransformerConfig& config) {
  if (auto v = mamba_initial_value(name, shape, config); v.defined()) return v;
  return initial_parameter_value(name, shape, config);
}

std::shared_ptr<HybridChunk> build_reference_hybrid(const HybridConfig& config) {
  const HybridPattern pattern = HybridPattern::parse(config.pattern);
  return std::make_shared<HybridChunk>(config, 0, static_cast<int>(pattern.layers.size()), true, true);
}

}  // namespace hp::model
