#include "model/gpt.hpp"
#include "model/tensor_parallel.hpp"

#include <c10/util/StringUtil.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/container/moduledict.h>

#include <cmath>
#include <stdexcept>

#include "model/context_parallel.hpp"
#include "model/hyper_connection.hpp"
#include "model/kv_cache.hpp"
#include "model/layers.hpp"
#include "model/loss_injection.hpp"
#include "model/mhc_recompute.hpp"
#include "model/mtp.hpp"

namespace hp::model {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument(msg); }

std::string shape_text(const at::Tensor& t) { return c10::str(t.sizes()); }  // "[2, 8]"

}  // namespace

bool name_ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

torch::Tensor initial_parameter_value(const std::string& name, at::IntArrayRef shape,
                                      const TransformerConfig& config) {
  const auto opts = at::TensorOptions().dtype(to_scalar_type(config.dtype));
  if (name_ends_with(name, "norm.weight")) return at::ones(shape, opts);
  if (name_ends_with(name, ".bias")) return at::zeros(shape, opts);
  auto gen = at::detail::createCPUGenerator(config.seed ^ fnv1a64(name));
  double std_dev = config.init_std;
  if (name_ends_with(name, "attention.proj.weight") || name_ends_with(name, "mlp.fc2.weight")) {
    std_dev /= std::sqrt(2.0 * config.num_layers);
  }
  auto value = at::empty(shape, at::TensorOptions().dtype(at::kDouble));
  value.normal_(0.0, std_dev, gen);
  return value.to(opts.dtype());
}

GPTChunk::GPTChunk(const TransformerConfig& config, const Partition& partition, int stage)
    : config_(config), stage_(stage) {
  config.validate();
  if (partition.num_layers() != config.num_layers) {
    fail("the partition (" + partition.describe() + ") splits " +
         std::to_string(partition.num_layers()) + " layers but model.num_layers is " +
         std::to_string(config.num_layers));
  }
  if (stage < 0 || stage >= partition.num_stages()) {
    fail("stage " + std::to_string(stage) + " is out of range: the partition has " +
         std::to_string(partition.num_stages()) + " stages (schedule.pp " +
         std::to_string(partition.pp()) + " x schedule.vpp " + std::to_string(partition.vpp()) + ")");
  }
  build(ChunkLayout{stage, partition.is_first(stage), partition.is_last(stage), partition.begin(stage),
                    partition.end(stage)});
}

GPTChunk::GPTChunk(const TransformerConfig& config, const ChunkLayout& layout)
    : config_(config), stage_(layout.stage) {
  config.validate();
  if (layout.layer_begin < 0 || layout.layer_begin > layout.layer_end || layout.layer_end > config.num_layers) {
    fail("chunk layers [" + std::to_string(layout.layer_begin) + ", " + std::to_string(layout.layer_end) +
         ") must lie within model.num_layers " + std::to_string(config.num_layers));
  }
  build(layout);
}

void GPTChunk::build(const ChunkLayout& layout) {
  const TransformerConfig& config = config_;
  first_ = layout.embedding;
  last_ = layout.head;
  layer_begin_ = layout.layer_begin;
  layer_end_ = layout.layer_end;

  const auto dtype = to_scalar_type(config.dtype);
  const bool mtp = last_ && config.mtp_num_layers > 0;
  if (first_ || (last_ && config.tie_embeddings) || mtp) {
    auto embedding = register_module("embedding", std::make_shared<torch::nn::Module>("embedding"));
    word_ = embedding->register_module(
        "word", std::make_shared<VocabParallelEmbedding>(config.vocab_size, config.hidden_size, dtype,
                                                         config.tensor_parallel));
    if (first_) {
      position_ = embedding->register_module(
          "position", std::make_shared<Embedding>(config.max_seq_len, config.hidden_size, dtype));
    }
  }
  auto layers = register_module("layers", torch::nn::ModuleDict());
  for (int i = layer_begin_; i < layer_end_; ++i) {
    auto block = std::make_shared<TransformerBlock>(config);
    block->set_mhc_recompute(config.recomputes_mhc());
    layers->update({{std::to_string(i), block}});
    blocks_.push_back(block);
  }
  if (last_) {
    final_norm_ = register_module(
        "final_norm", std::make_shared<LayerNorm>(config.hidden_size, config.layernorm_eps, dtype));
    if (!config.tie_embeddings) {
      lm_head_ = register_module("lm_head", std::make_shared<ColumnParallelLinear>(
                                                config.hidden_size, config.vocab_size, false, dtype,
                                                config.tensor_parallel));
    }
  }

  if (mtp) {
    auto make_layers = [&config](int) {
      auto block = std::make_shared<TransformerBlock>(config);
      block->set_mhc_recompute(config.recomputes_mhc());
      return std::vector<MtpLayer>{{block, [block](const torch::Tensor& x) { return block->forward(x); }}};
    };
    MtpOptions options;
    options.depth = config.mtp_num_layers;
    options.loss_scaling = config.mtp_loss_scaling_factor;
    mtp_ = register_module("mtp", std::make_shared<MultiTokenPrediction>(config, options, make_layers));
  }

  initialize_parameters(*this, config.tensor_parallel, [this](const std::string& name, at::IntArrayRef shape) {
    return initial_parameter_value(name, shape, config_);
  });
}

std::vector<int64_t> GPTChunk::input_shape(int64_t batch, int64_t seq) const {
  if (first_) return {batch, seq};
  return {batch, config_.local_seq(seq), config_.residual_width()};
}

std::vector<int64_t> GPTChunk::output_shape(int64_t batch, int64_t seq) const {
  const auto& tp = config_.tensor_parallel;
  if (last_) return {batch, seq / config_.context_parallel.size, config_.vocab_size / tp.size};
  return {batch, config_.local_seq(seq), config_.residual_width()};
}

c10::ScalarType GPTChunk::activation_dtype() const { return to_scalar_type(config_.dtype); }

torch::Tensor GPTChunk::embed(const torch::Tensor& tokens, const torch::Tensor& prefix, int64_t offset) {
  const auto fail_here = [this](const std::string& msg) {
    fail("GPTChunk stage " + std::to_string(stage_) + ": " + msg);
  };
  if (tokens.scalar_type() != at::kLong || tokens.dim() != 2) {
    fail_here("the first stage takes int64 token ids [batch, seq], got " +
              std::string(c10::toString(tokens.scalar_type())) + " " + shape_text(tokens));
  }
  const int64_t prefix_len = prefix.defined() ? prefix.size(1) : 0;
  if (prefix.defined()) {
    const auto dtype = to_scalar_type(config_.dtype);
    if (prefix.dim() != 3 || prefix.size(0) != tokens.size(0) || prefix.size(2) != config_.hidden_size ||
        prefix.scalar_type() != dtype) {
      fail_here("the prefix must be " + std::string(c10::toString(dtype)) + " [" + std::to_string(tokens.size(0)) +
                ", P, " + std::to_string(config_.hidden_size) + "], got " +
                std::string(c10::toString(prefix.scalar_type())) + " " + shape_text(prefix));
    }
  }
  const int64_t seq = prefix_len + tokens.size(1);
  if (tokens.size(1) < 1 || offset + seq > config_.max_seq_len) {
    fail_here("sequence length " + std::to_string(offset + seq) + " must be in 1..model.max_seq_len " +
              std::to_string(config_.max_seq_len));
  }
  // Checked where it costs no device round trip; a device's embedding kernel checks its own.
  if (tokens.numel() > 0 && tokens.is_cpu()) {
    const auto [min, max] = at::aminmax(tokens);
    const int64_t lo = min.item<int64_t>(), hi = max.item<int64_t>();
    if (lo < 0 || hi >= config_.vocab_size) {
      fail_here("token ids must lie in [0, model.vocab_size " + std::to_string(config_.vocab_size) + "), got values in [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  }
  const auto& tp = config_.tensor_parallel;
  if (tp.sequence_parallel && (prefix.defined() || seq % tp.size != 0))
    fail_here("sequence parallelism splits the sequence over " + std::to_string(tp.size) +
              " tensor-parallel ranks: the sequence length " + std::to_string(seq) +
              " must be divisible by it, without a prefix");
  const auto& cp = config_.context_parallel;
  if (cp.size > 1) {
    if (prefix.defined() || offset != 0 || seq % (2 * cp.size) != 0)
      fail_here("context parallelism splits the sequence into 2 x " + std::to_string(cp.size) +
                " chunks: the sequence length " + std::to_string(seq) +
                " must be divisible by it, without a prefix or a KV cache");
    const at::Tensor positions = context_parallel_positions(seq, cp);
    return stream(word_->forward(tokens.index_select(1, positions)) + position_->weight.index_select(0, positions));
  }
  torch::Tensor x = word_->forward(tokens);  // under sequence parallelism: this rank's share
  if (prefix.defined()) x = at::cat({prefix, x}, 1);
  const int64_t local = tp.local_seq(seq);
  x = x + position_->weight.narrow(0, offset + (tp.sequence_parallel ? tp.rank * local : 0), local);
  return stream(x);
}

torch::Tensor GPTChunk::stream(const torch::Tensor& x) const {
  // mHC: the residual leaves the embedding as n streams.
  return config_.enable_mhc_connections ? expand_streams(x, config_.mhc_num_residual_streams) : x;
}

torch::Tensor GPTChunk::run_layers(torch::Tensor x, const torch::Tensor& input, const torch::Tensor& target,
                                   KVCache* cache) {
  {
    MhcRecomputeScope groups(config_.mhc_recompute_layer_num, config_.recomputes_mhc() && !cache);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      x = blocks_[i]->forward(x, cache ? &cache->layers[layer_begin_ + static_cast<int>(i)] : nullptr);
      groups.layer_done(x, i + 1 == blocks_.size());
    }
  }
  if (last_) {
    // mHC: GPT contracts the streams by their mean before the final norm.
    if (config_.enable_mhc_connections) x = contract_streams_mean(x, config_.mhc_num_residual_streams);
    const torch::Tensor hidden = x;
    auto head = [this](const torch::Tensor& h) {
      const auto n = final_norm_->forward(h);
      return lm_head_ ? lm_head_->forward(n)
                      : at::linear(enter_tensor_parallel(n, config_.tensor_parallel), word_->weight);
    };
    x = head(hidden);
    if (mtp_ && !cache) {
      if (!target.defined())
        fail("GPTChunk stage " + std::to_string(stage_) + ": multi-token prediction needs the target (forward_with_target)");
      const auto m = mtp_->losses(hidden, target, [this](const torch::Tensor& ids) { return word_->forward(ids); }, head);
      x = inject_loss(x, m.total, mtp_grad_scale_);
    }
  }
  // An empty middle stage: return a graph-connected copy, never the input itself.
  if (x.is_same(input)) x = input.clone();
  return x;
}

torch::Tensor GPTChunk::forward(const torch::Tensor& tokens, const torch::Tensor& prefix) {
  if (!first_) fail("GPTChunk stage " + std::to_string(stage_) + ": only a chunk with the embedding takes a prefix");
  if (!tokens.defined()) fail("GPTChunk stage " + std::to_string(stage_) + ": input is an undefined tensor");
  return run_layers(embed(tokens, prefix), tokens);
}

torch::Tensor GPTChunk::forward(const torch::Tensor& input) { return forward_with_target(input, torch::Tensor()); }

torch::Tensor GPTChunk::forward_with_target(const torch::Tensor& input, const torch::Tensor& target) {
  const auto fail_here = [this](const std::string& msg) {
    fail("GPTChunk stage " + std::to_string(stage_) + ": " + msg);
  };
  if (!input.defined()) fail_here("input is an undefined tensor");
  if (first_) return run_layers(embed(input, torch::Tensor()), input, target);
  check_hidden(input, 0);
  return run_layers(input, input, target);
}

void GPTChunk::check_hidden(const torch::Tensor& input, int64_t offset) const {
  const auto fail_here = [this](const std::string& msg) {
    fail("GPTChunk stage " + std::to_string(stage_) + ": " + msg);
  };
  const auto dtype = to_scalar_type(config_.dtype);
  if (input.dim() != 3 || input.size(2) != config_.residual_width() || input.scalar_type() != dtype) {
    fail_here("expects hidden states " + std::string(c10::toString(dtype)) + " [batch, seq, " +
              std::to_string(config_.residual_width()) + "] (model.dtype, model.hidden_size" +
              (config_.enable_mhc_connections ? " x model.mhc_num_residual_streams" : "") + "), got " +
              std::string(c10::toString(input.scalar_type())) + " " + shape_text(input));
  }
  const int64_t seq = input.size(1);
  if (seq < 1 || offset + seq > config_.max_seq_len) {
    fail_here("sequence length " + std::to_string(offset + seq) + " must be in 1..model.max_seq_len " +
              std::to_string(config_.max_seq_len));
  }
}

torch::Tensor GPTChunk::decode(const torch::Tensor& input, KVCache& cache) {
  return decode(input, torch::Tensor(), cache);
}

torch::Tensor GPTChunk::decode(const torch::Tensor& input, const torch::Tensor& prefix, KVCache& cache) {
  if (!input.defined()) fail("GPTChunk stage " + std::to_string(stage_) + ": input is an undefined tensor");
  if (prefix.defined() && !first_)
    fail("GPTChunk stage " + std::to_string(stage_) + ": only a chunk with the embedding takes a prefix");
  torch::Tensor x;
  if (first_) {
    x = embed(input, prefix, cache.positions);
  } else {
    check_hidden(input, cache.positions);
    x = input;
  }
  const std::int64_t length = x.size(1);
  x = run_layers(x, input, torch::Tensor(), &cache);
  cache.positions += length;
  return x;
}

std::vector<std::string> GPTChunk::tied_parameter_names() const {
  if ((config_.tie_embeddings || config_.mtp_num_layers > 0) && first_ != last_) return {"embedding.word.weight"};
  return {};
}

std::vector<std::shared_ptr<GPTChunk>> build_gpt_chunks(const TransformerConfig& config,
                                                        const Partition& partition) {
  std::vector<std::shared_ptr<GPTChunk>> chunks;
  chunks.reserve(partition.num_stages());
  for (int s = 0; s < partition.num_stages(); ++s) {
    chunks.push_back(std::make_shared<GPTChunk>(config, partition, s));
  }
  return chunks;
}

std::vector<std::shared_ptr<GPTChunk>> build_rank_chunks(const TransformerConfig& config,
                                                         const Partition& partition, int rank) {
  std::vector<std::shared_ptr<GPTChunk>> chunks;
  chunks.reserve(partition.vpp());
  for (int c = 0; c < partition.vpp(); ++c) {
    chunks.push_back(std::make_shared<GPTChunk>(config, partition, partition.stage(rank, c)));
  }
  return chunks;
}

std::shared_ptr<GPTChunk> build_reference_gpt(const TransformerConfig& config) {
  config.validate();
  return std::make_shared<GPTChunk>(config, Partition::even(config.num_layers, 1, 1), 0);
}

}  // namespace hp::model
