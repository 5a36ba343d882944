#include "model/gpt_stages.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

#include "model/gpt.hpp"
#include "model/layers.hpp"
#include "model/lm_loss.hpp"
#include "model/mtp.hpp"
#include "model/context_parallel.hpp"
#include "model/preprocess.hpp"
#include "model/tensor_parallel.hpp"
#include "runtime/module_stage.hpp"

namespace hp::model {
namespace {

runtime::PipelineStage chunk_stage(std::shared_ptr<GPTChunk> chunk) {
  runtime::PipelineStage s;
  s.index = chunk->stage();
  s.parameters = runtime::parameters_of(*chunk);
  if (chunk->has_mtp())
    s.forward = [chunk](const at::Tensor& x, const runtime::MicroBatch& m) { return chunk->forward_with_target(x, m.target); };
  else
    s.forward = [chunk](const at::Tensor& x, const runtime::MicroBatch&) { return chunk->forward(x); };
  return s;
}

}  // namespace

std::vector<std::string> gpt_tied_parameters(const TransformerConfig& config) {
  if (config.tie_embeddings || config.mtp_num_layers > 0) return {"embedding.word.weight"};
  return {};
}

void add_mtp_metrics(runtime::RankModel& m, int depth, std::shared_ptr<MultiTokenPrediction> mtp) {
  m.metric_names = MultiTokenPrediction::metric_names(depth);
  if (mtp) m.metrics = [mtp] { return mtp->take_mean_losses(); };
}

Partition gpt_partition(const GPTStagesOptions& o, const schedule::ScheduleOptions& layout) {
  if (o.layers_per_stage.empty())
    return Partition::even(o.config.num_layers, layout.pp, layout.vpp, layout.placement());
  return Partition::from_counts(o.config.num_layers, layout.pp, layout.vpp, o.layers_per_stage, layout.placement());
}

void check_gpt_layout(const GPTStagesOptions& o, const schedule::ScheduleOptions& layout) {
  o.config.validate();
  const Partition partition = gpt_partition(o, layout);
  if (o.config.enable_mhc_connections && o.config.mtp_num_layers > 0 && layout.pp > 1)
    throw std::invalid_argument(
        "model.enable_mhc_connections with model.mtp_num_layers and schedule.pp " + std::to_string(layout.pp) +
        ": a pipelined GPT with mHC cannot run multi-token prediction, because its decoder contracts the residual "
        "before the multi-stream MTP block (as Megatron-LM rejects it); use the Hybrid model, whose MTP sits after "
        "its learned contraction, or schedule.pp 1");
  const int t = layout.transposed_layers();
  if (t < 0) throw std::invalid_argument("schedule.mpipe.transpose_layers must be >= 0, got " + std::to_string(t));
  if (t > 0 && t >= partition.count(0))
    throw std::invalid_argument("schedule.mpipe.transpose_layers must be < " + std::to_string(partition.count(0)) +
                                ", the layers of stage 0's first chunk (" + partition.describe() +
                                "), so its body keeps a layer; got " + std::to_string(t));
}

runtime::RankModel build_gpt_stages(const GPTStagesOptions& o, const schedule::ScheduleOptions& layout, int rank) {
  check_gpt_layout(o, layout);
  const Partition partition = gpt_partition(o, layout);
  const TransformerConfig& cfg = o.config;
  auto chunks = build_rank_chunks(cfg, partition, rank);
  runtime::RankModel m;
  const int t = layout.transposed_layers();
  if (t > 0) {
    auto preprocess = std::make_shared<GPTPreprocess>(cfg, t);
    m.tensor_parallel = tensor_parallel_shards(*preprocess->chunk());
    m.preprocess = runtime_preprocess(preprocess, o.micro_batch_rows, o.seq_len);
    if (rank == 0) {
      ChunkLayout body0;
      body0.stage = 0;
      body0.head = partition.is_last(0);
      body0.layer_begin = t;
      body0.layer_end = partition.end(0);
      chunks[0] = std::make_shared<GPTChunk>(cfg, body0);
    }
  }
  for (auto& chunk : chunks) {
    chunk->set_mtp_grad_scale(1.0 / layout.micro_batches);
    m.stages.push_back(chunk_stage(chunk));
    const auto shards = tensor_parallel_shards(*chunk);
    m.tensor_parallel.insert(shards.begin(), shards.end());
  }
  if (cfg.mtp_num_layers > 0) add_mtp_metrics(m, cfg.mtp_num_layers, chunks.back()->mtp());
  m.sequence_parallel = cfg.tensor_parallel.sequence_parallel && cfg.tensor_parallel.size > 1;
  // Under context parallelism the logits cover this rank's positions of the whole target.
  m.loss = [tp = cfg.tensor_parallel, cp = cfg.context_parallel](const at::Tensor& logits, const at::Tensor& labels) {
    return lm_loss(logits, context_parallel_share(labels, 1, cp), tp);
  };
  m.tied_parameters = gpt_tied_parameters(cfg);
  if (o.micro_batch_rows > 0 && o.seq_len > 0) m.output_spec = fixed_output_spec(o.micro_batch_rows, o.seq_len, cfg);
  return m;
}

std::function<runtime::TensorSpec(int, int)> fixed_output_spec(std::int64_t rows, std::int64_t seq,
                                                               const TransformerConfig& config) {
  const runtime::TensorSpec spec{{rows, config.local_seq(seq), config.residual_width()},
                                 to_scalar_type(config.dtype)};
  return [spec](int, int) { return spec; };
}

std::vector<runtime::MicroBatch> lm_micro_batches(const std::vector<at::Tensor>& tokens) {
  std::vector<runtime::MicroBatch> out;
  for (const auto& t : tokens) {
    if (t.dim() != 2 || t.size(1) < 2)
      throw std::invalid_argument("a language-model micro-batch is token ids [rows, seq + 1] with seq >= 1");
    runtime::MicroBatch m;
    m.input = t.slice(1, 0, t.size(1) - 1);
    m.target = t.slice(1, 1, t.size(1));
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace hp::model
