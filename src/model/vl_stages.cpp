#include "model/vl_stages.hpp"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

#include "model/gpt.hpp"
#include "model/lm_loss.hpp"
#include "model/vision.hpp"
#include "runtime/module_stage.hpp"
#include "schedule/generate.hpp"

namespace hp::model {
void check_vl_layout(const VLStagesOptions& o, const schedule::ScheduleOptions& layout) {
  o.text.config.validate();
  o.vision.validate();
  gpt_partition(o.text, layout);
  if (o.text.config.max_seq_len <= o.vision.num_patches())
    throw std::invalid_argument("a VL model's text positions (" + std::to_string(o.text.config.max_seq_len) +
                                ") must exceed its " + std::to_string(o.vision.num_patches()) +
                                " image patches, which come first");
  if (o.text.config.mtp_num_layers > 0)
    throw std::invalid_argument("model.mtp_num_layers: multi-token prediction needs a language model "
                                "(model.family gpt or hybrid); a VL model's captions follow image patches");
  const int t = layout.transposed_layers();
  if (t < 0 || t > o.vision.num_layers)
    throw std::invalid_argument("schedule.mpipe.transpose_layers counts vision tower blocks for a VL model: 0 <= T <= "
                                "vision.num_layers " + std::to_string(o.vision.num_layers) + ", got " +
                                std::to_string(t));
  // The schedule as the runtime will build it: a frozen tower is a frozen preprocess.
  schedule::ScheduleOptions s = layout;
  s.layers = 0;
  s.mpipe.frozen_preprocess = o.vision.frozen && t > 0;
  schedule::check_options(s);
}

runtime::RankModel build_vl_stages(const VLStagesOptions& o, const schedule::ScheduleOptions& layout, int rank) {
  check_vl_layout(o, layout);
  const TransformerConfig& text = o.text.config;
  const Partition partition = gpt_partition(o.text, layout);
  const int t = layout.transposed_layers();
  const std::int64_t rows = o.text.micro_batch_rows, seq = o.text.seq_len;
  const std::int64_t prefix = o.vision.num_patches();
  runtime::RankModel m;
  if (t > 0)
    m.preprocess = runtime_preprocess(std::make_shared<VisionPreprocess>(o.vision, text, t), rows, seq);
  for (auto& chunk : build_rank_chunks(text, partition, rank)) {
    runtime::PipelineStage s;
    s.index = chunk->stage();
    s.parameters = runtime::parameters_of(*chunk);
    if (chunk->stage() == 0) {
      // The tower blocks stage 0 still runs (none when MPipe transposes them all).
      std::shared_ptr<VisionTower> tower;
      if (t < o.vision.num_layers) {
        tower = std::make_shared<VisionTower>(o.vision, text, t, o.vision.num_layers);
        for (const auto& p : tower->global_parameters()) s.parameters.push_back(p);
      }
      s.forward = [chunk, tower](const at::Tensor& x, const runtime::MicroBatch& micro) {
        return chunk->forward(micro.extra, tower ? tower->forward(x) : x);
      };
    } else {
      s.forward = [chunk](const at::Tensor& x, const runtime::MicroBatch&) { return chunk->forward(x); };
    }
    m.stages.push_back(std::move(s));
  }
  m.tied_parameters = gpt_tied_parameters(text);
  m.loss = [](const at::Tensor& logits, const at::Tensor& labels) {
    const int64_t n = labels.size(1);
    return lm_loss(logits.size(1) == n ? logits : logits.narrow(1, logits.size(1) - n, n), labels);
  };
  // The image patches come first in every text position.
  if (rows > 0 && seq > 0) m.output_spec = fixed_output_spec(rows, prefix + seq, text);
  return m;
}

std::vector<runtime::MicroBatch> vl_micro_batches(const std::vector<at::Tensor>& captions,
                                                  const std::vector<at::Tensor>& images) {
  if (captions.size() != images.size())
    throw std::invalid_argument(std::to_string(images.size()) + " image micro-batches for " +
                                std::to_string(captions.size()) + " caption micro-batches");
  std::vector<runtime::MicroBatch> out;
  for (size_t i = 0; i < captions.size(); ++i) {
    const at::Tensor& c = captions[i];
    if (c.dim() != 2 || c.size(1) < 2)
      throw std::invalid_argument("a caption micro-batch is token ids [rows, tokens] with tokens >= 2");
    if (images[i].defined() && images[i].size(0) != c.size(0))
      throw std::invalid_argument("micro-batch " + std::to_string(i) + " has " + std::to_string(images[i].size(0)) +
                                  " images for " + std::to_string(c.size(0)) + " captions");
    runtime::MicroBatch m;
    m.input = images[i];
    m.extra = c.slice(1, 0, c.size(1) - 1);
    m.target = c.slice(1, 1, c.size(1));
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace hp::model
