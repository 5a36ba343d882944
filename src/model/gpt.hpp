// GPT split into pipeline chunks.
//
// A GPTChunk is the part of one GPT that one global pipeline stage holds:
//   stage 0 (is_first): token + position embeddings   ("embedding.word", "embedding.position")
//   every stage:        its layers [begin, end) of the Partition ("layers.<global index>")
//   last stage:         final LayerNorm + LM head      ("final_norm", "lm_head")
// Parameter names are global and identical for every layout, so the union of
// named_parameters() over all chunks of any partition equals the names of the
// single-chunk reference model, and checkpoints load into any layout:
//   embedding.word.weight  embedding.position.weight
//   layers.<i>.{attn_norm,mlp_norm}.{weight,bias}
//   layers.<i>.attention.{qkv,proj}.{weight,bias}  layers.<i>.mlp.{fc1,fc2}.{weight,bias}
//   final_norm.{weight,bias}  lm_head.weight (absent with tie_embeddings)
// With tie_embeddings the last stage holds its own copy of embedding.word.weight
// (same name, same initial value) and uses it as the head; the runtime must sum
// that parameter's gradient over the first and last stage (tied_parameter_names).
// With multi-token prediction (mtp_num_layers) the last stage holds mtp.<k>.*
// and, for the depths' token embeddings, a copy of embedding.word.weight too.
//
// Initial values depend only on (config.seed, global name, shape, init_std,
// num_layers), never on the layout (initial_parameter_value); a tensor-parallel
// rank holds its shard of them (model/tensor_parallel.hpp): the embedding and
// the LM head split over the vocabulary, each layer's attention over heads and
// MLP over its inner width.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "model/partition.hpp"
#include "model/transformer_config.hpp"

namespace hp::model {

class ColumnParallelLinear;
class Embedding;
struct KVCache;
class LayerNorm;
class MultiTokenPrediction;
class Linear;
class TransformerBlock;
class VocabParallelEmbedding;

// Where a chunk sits in the model when it is not simply one stage of a
// Partition: MPipe Transpose (runtime/mpipe_runtime.hpp) splits stage 0 into a
// preprocess block (the embedding and layers [0, T)) and body0 (layers
// [T, end(0))), each a GPTChunk with its own layout and the usual global names.
struct ChunkLayout {
  int stage = 0;           // the global stage the chunk runs as
  bool embedding = false;  // takes token ids and holds embedding.* (the model's first part)
  bool head = false;       // holds final_norm and lm_head (the model's last part)
  int layer_begin = 0;     // global layers [layer_begin, layer_end)
  int layer_end = 0;
};

class GPTChunk : public torch::nn::Module {
 public:
  // Validates config (TransformerConfig::validate), checks that the partition
  // splits config.num_layers layers and that stage is one of its stages; throws
  // std::invalid_argument otherwise. Parameters get their initial values.
  GPTChunk(const TransformerConfig& config, const Partition& partition, int stage);
  // An explicit layout; throws std::invalid_argument unless
  // 0 <= layer_begin <= layer_end <= config.num_layers.
  GPTChunk(const TransformerConfig& config, const ChunkLayout& layout);

  // Batch-first, any seq length 1..max_seq_len (it may change between calls):
  //   first stage:  int64 token ids [batch, seq] in [0, vocab) -> hidden [batch, seq, hidden]
  //   middle stage: hidden [batch, seq, hidden] (config dtype)  -> hidden
  //   last stage:   hidden -> logits [batch, seq, vocab]; first and last: tokens -> logits.
  //   Under tensor parallelism the logits are this rank's vocabulary share,
  //   [batch, seq, vocab / tp] (model::vocab_parallel_cross_entropy); under
  //   context parallelism every output covers this rank's seq / cp positions
  //   (model/context_parallel.hpp) while the first stage takes whole sequences.
  // The output is always a new tensor, never the input or a view of it (an empty
  // middle stage returns a graph-connected copy), so a sent output can be
  // pseudo-deallocated. Bad input throws std::invalid_argument.
  torch::Tensor forward(const torch::Tensor& input);
  // First stage only: the hidden states `prefix` [batch, P, hidden] (e.g. a VL
  // model's projected image features) come before the embedded tokens
  // [batch, S]; positions run over all P + S <= max_seq_len entries.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& prefix);
  // The last stage of a model with multi-token prediction (mtp_num_layers > 0):
  // forward(input) plus the MTP loss over `target` (the next tokens), which
  // enters backward through the returned logits (model/mtp.hpp).
  torch::Tensor forward_with_target(const torch::Tensor& input, const torch::Tensor& target);
  // Decoding (generation): input covers the positions after the cache's
  // (token ids on the first stage, hidden states elsewhere); attention reads
  // and extends the cache, whose position count advances by the input's
  // length, up to max_seq_len. Returns what forward() returns for those
  // positions; multi-token prediction does not run. Call under no-grad.
  torch::Tensor decode(const torch::Tensor& input, KVCache& cache);
  // decode() on the first stage with `prefix` (defined: a VL model's image
  // features [batch, P, hidden], as forward(tokens, prefix) takes them) before
  // the tokens' positions; the cache then advances by P + the tokens.
  torch::Tensor decode(const torch::Tensor& tokens, const torch::Tensor& prefix, KVCache& cache);
  bool has_mtp() const { return mtp_ != nullptr; }
  const std::shared_ptr<MultiTokenPrediction>& mtp() const { return mtp_; }
  // The MTP loss's weight per micro-batch (1 / micro-batches, as the main
  // loss weighs one); set by the stage builder, 1 by default.
  void set_mtp_grad_scale(double scale) { mtp_grad_scale_ = scale; }

  int stage() const { return stage_; }
  bool is_first() const { return first_; }
  bool is_last() const { return last_; }
  int layer_begin() const { return layer_begin_; }
  int layer_end() const { return layer_end_; }
  const TransformerConfig& config() const { return config_; }

  // Shapes forward() takes and returns for a micro-batch of [batch, seq] tokens:
  // input  [batch, seq] (int64 tokens, first stage) or [batch, seq, hidden];
  // output [batch, seq, vocab] (last stage) or [batch, seq, hidden]. Activations
  // between stages have the config dtype (activation_dtype).
  std::vector<int64_t> input_shape(int64_t batch, int64_t seq) const;
  std::vector<int64_t> output_shape(int64_t batch, int64_t seq) const;
  c10::ScalarType activation_dtype() const;

  // Names of this chunk's parameters that have a copy in another stage and whose
  // gradients must be summed over the holders (first and last stage) after the
  // backward pass and before the optimizer step: {"embedding.word.weight"} when
  // tie_embeddings is on and this chunk is the first or the last stage but not
  // both (then the head uses the one parameter directly); empty otherwise.
  std::vector<std::string> tied_parameter_names() const;

 private:
  void build(const ChunkLayout& layout);
  torch::Tensor run_layers(torch::Tensor x, const torch::Tensor& input, const torch::Tensor& target = {},
                           KVCache* cache = nullptr);
  // Positions [offset, offset + P + S) of the prefix and the tokens.
  torch::Tensor embed(const torch::Tensor& tokens, const torch::Tensor& prefix, int64_t offset = 0);
  // The embedding's output as the residual (n streams under mHC).
  torch::Tensor stream(const torch::Tensor& x) const;
  // A middle or last stage's input at positions [offset, offset + seq).
  void check_hidden(const torch::Tensor& input, int64_t offset) const;

  TransformerConfig config_;
  int stage_;
  bool first_;
  bool last_;
  int layer_begin_;
  int layer_end_;
  std::shared_ptr<VocabParallelEmbedding> word_;  // first stage, or last stage with tied embeddings
  std::shared_ptr<Embedding> position_;  // first stage
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<LayerNorm> final_norm_;  // last stage
  std::shared_ptr<ColumnParallelLinear> lm_head_;  // last stage without tied embeddings
  std::shared_ptr<MultiTokenPrediction> mtp_;  // last stage with mtp_num_layers > 0
  double mtp_grad_scale_ = 1.0;
};

// The deterministic initial value of the parameter with this global name and
// shape, in config.dtype, for a parameter whose module declares no rule of its
// own (model/param_init.hpp): LayerNorm weights (*norm.weight) ones, biases zeros,
// every other weight normal(0, init_std) drawn in double from a CPU generator
// seeded with config.seed ^ fnv1a64(name); output projections
// (attention.proj.weight, mlp.fc2.weight) use init_std / sqrt(2 * num_layers),
// as in GPT-2.
torch::Tensor initial_parameter_value(const std::string& name, at::IntArrayRef shape,
                                      const TransformerConfig& config);

// Whether a parameter's global name ends with suffix: the initial values of
// every model family go by the parameter's role in its name.
bool name_ends_with(const std::string& name, const std::string& suffix);

// Every chunk of a partition, indexed by global stage.
std::vector<std::shared_ptr<GPTChunk>> build_gpt_chunks(const TransformerConfig& config,
                                                        const Partition& partition);
// The chunks one pipeline rank holds, indexed by chunk (stage = partition.stage(rank, chunk)).
std::vector<std::shared_ptr<GPTChunk>> build_rank_chunks(const TransformerConfig& config,
                                                         const Partition& partition, int rank);
// The single-process reference: pp = 1, vpp = 1, one chunk holding the whole
// model (tokens -> logits); what distributed runs are compared against.
std::shared_ptr<GPTChunk> build_reference_gpt(const TransformerConfig& config);

}  // namespace hp::model
