// The Hybrid model (Megatron-LM's hybrid/Mamba models): a decoder whose layers
// follow a pattern (model/hybrid_pattern.hpp) of Mamba mixers, attention, MLPs
// and mixtures of experts, each a pre-norm residual layer
//   x + mixer(norm(x))                or, with mHC,   HyperConnection(x, mixer . norm)
// A HybridChunk is one pipeline stage's part: stage 0 adds the token and
// position embeddings (and expands the residual into n streams with mHC),
// every stage runs its segment's layers, the last stage contracts the streams
// with a learned contraction (mHC), then final_norm and lm_head.
//
// Learned contraction (mHC, "final_contraction"; Megatron's
// learned_output_contract with hc_head_fn, hc_head_base, hc_head_scale), per
// token, for the whole multi-stream x = [x_0; ...; x_{n-1}] (n C values):
//   y = sum_j (sigmoid(scale * (x . w_j) * rsqrt(mean(x^2) + eps) + base_j) + eps) * x_j
// so each stream's gate sees every stream (weight [n, nC], xavier-uniform;
// scale 1, base 0), computed in at least float32, eps the layernorm epsilon.
//
// MTP (the pattern's / parts, model/mtp.hpp) sits on the final stage. With
// mHC it takes the decoder's n streams before the contraction and carries
// streams from depth to depth, each depth contracting and normalising on its
// own (Megatron's MTP with hyper-connections); without mHC it takes the
// single stream before the final norm. It shares the embedding (the final
// stage holds a copy of embedding.word.weight, tied to stage 0's) and the LM head.
//
// Global names: embedding.{word,position}.weight, layers.<i>.norm.*,
// layers.<i>.mixer.*, layers.<i>.hc.* (mHC), final_contraction.{scale,weight,base},
// final_norm.*, lm_head.weight, mtp.<k>.*. Initial values depend only on the name and the
// seed (hybrid_initial_value), never on the layout.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "model/hybrid_pattern.hpp"
#include "model/param_init.hpp"
#include "model/mamba.hpp"
#include "model/moe.hpp"
#include "model/transformer_config.hpp"

namespace hp::model {

class ColumnParallelLinear;
class Embedding;
class VocabParallelEmbedding;
class HyperConnection;
class MultiTokenPrediction;
class LayerNorm;
class Linear;
struct KVCache;

struct HybridConfig {
  TransformerConfig base;       // widths, vocabulary, positions, dtype, seed, mHC
  std::string pattern = "M*-E";  // --hybrid-pattern
  MambaOptions mamba;
  MoEOptions moe;
  double mtp_loss_scaling = 0.1;  // the MTP loss is mtp_loss_scaling / depth * sum of the depths' losses
  // The weight of the MoE balance and MTP losses' gradients per micro-batch:
  // 1 / micro-batches, set by the stage builder (overrides moe.aux_loss_scale).
  double aux_loss_scale = 1.0;

  // Validates base and the pattern; throws std::invalid_argument naming the option.
  void validate() const;
};

// One pre-norm residual layer of the given kind.
class HybridLayer : public torch::nn::Module {
 public:
  // index: the layer's global index, its key in a decoding cache.
  HybridLayer(const HybridConfig& config, LayerKind kind, int index = -1);
  // cache (decoding): x holds the positions after the cache's; attention and
  // Mamba layers read and extend their entries (model/kv_cache.hpp).
  torch::Tensor forward(const torch::Tensor& x, KVCache* cache = nullptr);
  // Selective mHC recompute of the layer's hyper-connection (no-op without mHC).
  void set_mhc_recompute(bool on);
  LayerKind kind() const { return kind_; }

 private:
  LayerKind kind_;
  int index_;
  std::shared_ptr<LayerNorm> norm_;
  std::function<torch::Tensor(const torch::Tensor&, KVCache*)> mix_;
  std::shared_ptr<HyperConnection> hc_;
};

// mHC's learned contraction of n streams [..., n * C] -> [..., C].
class LearnedContraction : public torch::nn::Module, public DeclaresInit {
 public:
  explicit LearnedContraction(const TransformerConfig& config);
  torch::Tensor forward(const torch::Tensor& x);
  std::map<std::string, ParamInit> own_inits() const override;
  torch::Tensor scale, weight, base;  // [1], [n, nC], [n]

 private:
  int64_t streams_, width_;
  double eps_;
  std::uint64_t seed_;
  c10::ScalarType dtype_;
};

class HybridChunk : public torch::nn::Module {
 public:
  // Layers [begin, end) of the decoder; first: takes token ids and holds the
  // embedding; last: holds the head. Throws std::invalid_argument on a bad range.
  HybridChunk(const HybridConfig& config, int begin, int end, bool first, bool last);
  // first: int64 tokens [batch, seq]; else [batch, seq, residual width].
  // last: logits [batch, seq, vocab]. Never returns its input or a view of it
  // (an empty middle stage returns a graph-connected copy). The last stage of
  // a pattern with MTP parts needs the micro-batch's target (next tokens).
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& target = {});
  // Decoding: input covers the positions after the cache's (tokens on the
  // first stage, residual states elsewhere); returns what forward() returns
  // for them, without MTP; the cache advances by input's length, up to
  // max_seq_len. Call under no-grad.
  torch::Tensor decode(const torch::Tensor& input, KVCache& cache);
  const std::shared_ptr<MultiTokenPrediction>& mtp() const { return mtp_; }

 private:
  torch::Tensor run(const torch::Tensor& input, const torch::Tensor& target, KVCache* cache);

  HybridConfig config_;
  bool first_, last_;
  std::shared_ptr<VocabParallelEmbedding> word_;
  std::shared_ptr<Embedding> position_;
  std::vector<std::shared_ptr<HybridLayer>> layers_;
  std::shared_ptr<LearnedContraction> contraction_;
  std::shared_ptr<LayerNorm> final_norm_;
  std::shared_ptr<ColumnParallelLinear> lm_head_;
  std::shared_ptr<MultiTokenPrediction> mtp_;
};

// The initial value of a Hybrid parameter by global name whose module declares
// none (the mHC modules do): Mamba's own, else initial_parameter_value.
torch::Tensor hybrid_initial_value(const std::string& name, at::IntArrayRef shape, const TransformerConfig& config);

// The single-process reference: every decoder layer in one chunk.
std::shared_ptr<HybridChunk> build_reference_hybrid(const HybridConfig& config);

}  // namespace hp::model
