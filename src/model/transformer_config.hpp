// TransformerConfig: the shape and initialisation of a GPT-style decoder.
//
// Plain data, free of LibTorch, so the CLI, the planner and the runtime can
// build, print and validate it cheaply. Field names follow the command-line
// flags (num_layers <-> --layers, hidden_size <-> --hidden, ...); validate()
// names the option as model.<field> ("model.num_attention_heads"), which each
// command maps to its own flag (cli/option_flags.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hp::comm {
class ProcessGroup;
}

namespace hp::model {

// Tensor parallelism (Megatron's): attention heads, the MLP's inner width and
// the vocabulary are split over `size` ranks, this one being `rank`
// (model/tensor_parallel.hpp). The size is part of the run's layout, never of
// the model: checkpoints hold unsharded tensors. The builder of a rank's
// model sets rank and group (the tp group of comm/mesh.hpp, which must
// outlive the model); a model built without a group holds rank's shards and
// cannot run forward with size > 1.
// With sequence_parallel (Megatron's), the activations outside the
// tensor-parallel regions (norms, residuals, the activations between stages)
// are split along the sequence too: [batch, seq / size, width].
struct TensorParallel {
  int size = 1;                    // --tp
  bool sequence_parallel = false;  // --sequence-parallel
  int rank = 0;
  comm::ProcessGroup* group = nullptr;
  // The share of a sequence of `seq` positions this rank's activations hold.
  std::int64_t local_seq(std::int64_t seq) const { return sequence_parallel ? seq / size : seq; }
};

// Context parallelism: every sequence split over `size` ranks in 2 x size
// equal chunks, rank r holding chunks r and 2 size - 1 - r (so the causal
// attention work is the same on every rank); attention gathers the keys and
// values of the whole sequence (model/context_parallel.hpp). Like
// TensorParallel, part of the run's layout, with rank and group set by the
// builder of a rank's model.
struct ContextParallel {
  int size = 1;  // --cp
  int rank = 0;
  comm::ProcessGroup* group = nullptr;
};

// The parallel groups a rank's model is split over.
struct ModelParallel {
  TensorParallel tensor;
  ContextParallel context;
};

// Parameter / activation precision. Float64 is what the correctness tests use.
enum class DType : std::uint8_t { Float32, Float64 };

std::string_view dtype_name(DType d);                         // "float32", "float64"
std::optional<DType> dtype_from_name(std::string_view name);  // also accepts "fp32"/"fp64"
std::vector<std::string> dtype_names();                        // the names the command line offers
inline double dtype_bytes(DType d) { return d == DType::Float64 ? 8 : 4; }  // bytes an element

// Contract: after validate() succeeds, every derived quantity below is positive
// and hidden_size % num_attention_heads == 0. Construction never validates, so a
// config can be filled field by field from TOML and command-line overrides.
// Emulated devices (model/emulated_device.hpp): a fixed time per transformer
// layer, slept, so pipelines of many ranks overlap on a few cores. The times
// are the whole layer's on one device: a tensor-parallel rank sleeps 1/tp.
struct EmulatedLayer {
  double forward_ms = 0;      // --emulate-layer-ms F[,B]: each layer's forward ...
  double backward_ms = 0;     // ... and backward (B defaults to 2F)
  bool replace_math = false;  // --emulate-only: a layer is its delay alone (no parameters, no math)
  bool active() const { return forward_ms > 0 || backward_ms > 0 || replace_math; }
};

struct TransformerConfig {
  int num_layers = 8;           // --layers: transformer blocks in the whole model
  int hidden_size = 64;         // --hidden: residual width
  int num_attention_heads = 4;  // --heads: must divide hidden_size
  int ffn_hidden_size = 0;      // --ffn-hidden: MLP inner width; 0 means 4 * hidden_size
  int vocab_size = 256;         // --vocab
  int max_seq_len = 64;         // --seq-len: longest sequence (size of the position table)
  bool tie_embeddings = false;  // --tie-embeddings: the LM head reuses the word embedding
  double dropout = 0.0;         // --dropout: must stay 0 (runs are bitwise deterministic)
  double layernorm_eps = 1e-5;  // --layernorm-eps
  double init_std = 0.02;       // --init-std: std of the normal weight init
  std::uint64_t seed = 1234;    // --seed: with a parameter's name, fixes its initial value
  DType dtype = DType::Float32; // --dtype: float32 | float64

  // Multi-stream residuals (mHC, model/hyper_connection.hpp): the residual
  // carries n streams of hidden_size each, mixed around every sublayer.
  bool enable_mhc_connections = false;  // --mhc
  int mhc_num_residual_streams = 4;     // --mhc-streams: n >= 1
  int mhc_sinkhorn_iterations = 20;     // --mhc-sinkhorn-iterations: >= 1
  double mhc_init_gating_factor = 0.01; // --mhc-init-gating-factor: >= 0, the gates' initial value

  // Selective recompute: "mhc" recomputes every layer's hyper-connections in
  // backward (model/mhc_recompute.hpp), in groups of mhc_recompute_layer_num
  // consecutive layers of a pipeline chunk or an MTP depth (0: one group per
  // chunk, Megatron's None), so a group never crosses a stage boundary.
  std::string recompute_modules;        // --recompute-modules: comma-separated, "mhc"
  int mhc_recompute_layer_num = 0;      // --mhc-recompute-layer-num
  bool recomputes_mhc() const;

  // Multi-token prediction (model/mtp.hpp) on the last stage: depths, each one
  // decoder layer (GPT), and the weight of their mean loss.
  int mtp_num_layers = 0;               // --mtp-layers
  double mtp_loss_scaling_factor = 0.1; // --mtp-loss-scaling

  TensorParallel tensor_parallel;
  ContextParallel context_parallel;

  // Emulated devices (model/emulated_device.hpp): every transformer layer
  // also (or, with replace_math, only) takes a fixed time.
  EmulatedLayer emulate;

  // Throws std::invalid_argument naming the option (model.<field>) and what is allowed.
  void validate() const;

  // ffn_hidden_size, or 4 * hidden_size when it is 0.
  int ffn_hidden() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  int head_dim() const { return hidden_size / num_attention_heads; }
  // Streams of the residual: n with mHC, else 1.
  int residual_streams() const { return enable_mhc_connections ? mhc_num_residual_streams : 1; }
  // Width of the residual between layers and stages: hidden_size * streams.
  int residual_width() const { return hidden_size * residual_streams(); }

  // This rank's share of a sequence of `seq` positions between layers and
  // stages: divided by the context-parallel size, then by the tensor-parallel
  // size under sequence parallelism.
  std::int64_t local_seq(std::int64_t seq) const {
    return tensor_parallel.local_seq(seq / context_parallel.size);
  }

  // One line for logs, option names and values ("model.num_layers 8
  // model.hidden_size 64 ..."), which a command prints as its flags.
  std::string describe() const;
};

}  // namespace hp::model
