// The model's, the data's, the training loop's, bench's and generate's
// options: the half of the schema that only a build with LibTorch has.
#include "cli/option_schema.hpp"

#include "cli/emulate_flags.hpp"
#include "cli/job_options.hpp"
#include "family/model_family.hpp"
#include "infer/decoder.hpp"
#include "model/hybrid.hpp"
#include "model/transformer_config.hpp"
#include "model/vision_config.hpp"
#include "runtime/executor.hpp"
#include "schedule/schedule.hpp"
#include "train/lm_data.hpp"
#include "train/trainer.hpp"
#include "train/weights_file.hpp"

namespace hp::cli {
namespace {

// --model's help: every registered family's name and line.
std::string family_help() {
  std::string help;
  for (const auto& name : family::family_names())
    help += (help.empty() ? "" : "; ") + name + ": " + family::find_family(name).help;
  return help;
}

}  // namespace

std::size_t model_registry_size() { return family::family_names().size(); }

std::vector<OptionSpec> model_options() {
#define HP_FIELD HP_OPTION_FIELD
  constexpr unsigned kJob = kJobCommands, kRun = kRunCommands;
  return {
      {"bench.schedules", "--schedules", kBench,
       "comma-separated schedules, --schedule's names (" + schedule::kind_names() +
           "): mpipe is around interleaved, mpipe/BODY around another body (mpipe/1f1b, mpipe/zb1p, ...)",
       HP_FIELD(r.values->schedules)},
      // the model
      {"model.family", "--model", kRun, family_help(), HP_FIELD(r.values->model), one_of(family::family_names)},
      {"model.hybrid_pattern", "--hybrid-pattern", kRun,
       "hybrid: M Mamba, * attention, - MLP, E mixture of experts, | pipeline segment (one per stage), / MTP depth",
       HP_FIELD(r.hybrid->pattern)},
      {"model.moe_num_experts", "--moe-experts", kRun, "hybrid: experts per E layer", HP_FIELD(r.hybrid->moe.num_experts),
       at_least(1)},
      {"model.overlap_moe_expert_parallel_comm", "--overlap-moe-expert-parallel-comm", kRun,
       "hybrid: Megatron's expert all-to-all overlap; refused (no expert parallelism; rejected with mHC PP)",
       HP_FIELD(r.hybrid->moe.overlap_expert_parallel_comm)},
      {"model.moe_top_k", "--moe-top-k", kRun, "hybrid: experts per token", HP_FIELD(r.hybrid->moe.top_k), at_least(1)},
      {"model.moe_aux_loss_coeff", "--moe-aux-loss-coeff", kRun, "hybrid: weight of the load-balancing loss",
       HP_FIELD(r.hybrid->moe.aux_loss_coeff), at_least(0)},
      {"model.mamba_state_size", "--mamba-state", kRun, "hybrid: state size N of the Mamba mixers",
       HP_FIELD(r.hybrid->mamba.state_size), at_least(1)},
      {"vision.num_layers", "--vision-layers", kRun, "vl: vision tower blocks V (MPipe T counts these, 1..V)",
       HP_FIELD(r.vision->num_layers), at_least(1)},
      {"vision.frozen", "--freeze-vision", kRun, "vl: the tower does not train (MPipe broadcasts it once)",
       HP_FIELD(r.vision->frozen), {}, "schedule.mpipe.frozen_preprocess"},
      {"vision.image_size", "--image-size", kRun, "vl: pixels per image side", HP_FIELD(r.vision->image_size),
       at_least(4)},
      {"vision.patch_size", "--patch-size", kRun, "vl: pixels per patch side", HP_FIELD(r.vision->patch_size),
       at_least(1)},
      {"vision.hidden_size", "--vision-hidden", kRun, "vl: tower width", HP_FIELD(r.vision->hidden_size), at_least(1)},
      {"vision.num_attention_heads", "--vision-heads", kRun, "vl: tower attention heads",
       HP_FIELD(r.vision->num_attention_heads), at_least(1)},
      {"data.micro_batch_size", "--micro-batch-size", kRun, "sequences per micro-batch",
       HP_FIELD(r.data->micro_batch_size), at_least(1)},
      {"data.seq_len", "--seq-len", kRun, "tokens per sequence (vl: fixed by the captions)", HP_FIELD(r.data->seq_len),
       at_least(1),
       "model.max_seq_len"},
      {"data.variable_seq_len", "--variable-seq-len", kJob,
       "each micro-batch's sequences get their own length in [seq-len/2, seq-len]; shapes travel with every message",
       HP_FIELD(r.data->variable_seq_len)},
      {"model.num_layers", "--layers", kRun, "transformer layers", HP_FIELD(r.model->num_layers),
       at_least(1), "schedule.layers"},
      {"model.layers_per_stage", "--layers-per-stage", kRun,
       "explicit layer counts per global stage, e.g. 3,1,2,2 (bench: the same for every schedule)",
       HP_FIELD(r.values->layers_per_stage), {}, "", false},
      {"model.hidden_size", "--hidden", kRun, "hidden size", HP_FIELD(r.model->hidden_size), at_least(1)},
      {"model.num_attention_heads", "--heads", kRun, "attention heads", HP_FIELD(r.model->num_attention_heads),
       at_least(1)},
      {"model.ffn_hidden_size", "--ffn-hidden", kJob, "MLP width (0 = 4 * hidden)", HP_FIELD(r.model->ffn_hidden_size),
       at_least(0)},
      {"model.vocab_size", "--vocab", kRun, "vocabulary size", HP_FIELD(r.model->vocab_size), at_least(1)},
      {"model.tie_embeddings", "--tie-embeddings", kJob, "share the word embedding with the LM head",
       HP_FIELD(r.model->tie_embeddings)},
      {"model.mtp_num_layers", "--mtp-layers", kJob,
       "gpt: multi-token prediction depths (hybrid: / parts of the pattern)", HP_FIELD(r.model->mtp_num_layers),
       at_least(0)},
      {"model.mtp_loss_scaling_factor", "--mtp-loss-scaling", kJob, "weight of the mean MTP loss (gpt; hybrid too)",
       HP_FIELD(r.model->mtp_loss_scaling_factor), at_least(0), "model.mtp_loss_scaling"},
      {"model.recompute_modules", "--recompute-modules", kJob, "selective recompute, comma-separated: mhc",
       HP_FIELD(r.model->recompute_modules)},
      {"model.mhc_recompute_layer_num", "--mhc-recompute-layer-num", kJob,
       "with --recompute-modules mhc: layers per recompute group (Megatron's; every layer recomputes; 0: one group "
       "per chunk)",
       HP_FIELD(r.model->mhc_recompute_layer_num), at_least(0)},
      {"model.enable_mhc_connections", "--mhc", kJob,
       "multi-stream residuals (manifold-constrained hyper-connections)", HP_FIELD(r.model->enable_mhc_connections)},
      {"model.mhc_num_residual_streams", "--mhc-streams", kJob, "mHC: residual streams n",
       HP_FIELD(r.model->mhc_num_residual_streams), at_least(1)},
      {"model.mhc_sinkhorn_iterations", "--mhc-sinkhorn-iterations", kJob, "mHC: Sinkhorn-Knopp passes",
       HP_FIELD(r.model->mhc_sinkhorn_iterations), at_least(1)},
      {"model.mhc_init_gating_factor", "--mhc-init-gating-factor", kJob, "mHC: initial value of the gates",
       HP_FIELD(r.model->mhc_init_gating_factor), at_least(0)},
      {"model.seed", "--seed", kJob, "seed of the initial weights and of the batches", HP_FIELD(r.model->seed)},
      {"model.dtype", "--dtype", kJob, "the parameters' and the computation's floating-point type", HP_FIELD(r.values->dtype),
       one_of(model::dtype_names)},
      {"model.tensor_parallel.size", "--tp", kRun,
       "tensor-parallel ranks per stage (Megatron's: heads, MLP width and vocabulary split; --model gpt and hybrid; "
       "bench: an emulated layer's time is split over them)",
       HP_FIELD(r.model->tensor_parallel.size), at_least(1)},
      {"model.context_parallel.size", "--cp", kJob,
       "context-parallel ranks per stage: each holds 2 of 2 x cp sequence chunks, attention gathers the keys and "
       "values (--model gpt)",
       HP_FIELD(r.model->context_parallel.size), at_least(1)},
      {"model.tensor_parallel.sequence_parallel", "--sequence-parallel", kJob,
       "with --tp: split the activations outside the tensor-parallel regions along the sequence too",
       HP_FIELD(r.model->tensor_parallel.sequence_parallel)},
      {"model.emulate", "--emulate-layer-ms", kRun,
       "emulated devices: every layer also sleeps F ms forward and B ms backward (F or F,B; default B = 2F)",
       HP_FIELD(r.values->emulate_layer_ms), custom(check_emulate_layer_ms, "F[,B] ms"), "", false},
      {"model.emulate.replace_math", "--emulate-only", kRun,
       "emulated devices: a layer is its --emulate-layer-ms delay alone (no math, no parameters)",
       HP_FIELD(r.model->emulate.replace_math), {}, "", true, "--emulate-layer-ms"},

      // the training loop
      {"train.steps", "--steps", kJob, "number of the last step", HP_FIELD(r.train->steps), at_least(1)},
      {"bench.steps", "--steps", kBench, "timed steps per schedule", HP_FIELD(r.values->bench_steps), at_least(1)},
      {"train.lr.max_lr", "--lr", kJob, "peak learning rate", HP_FIELD(r.train->lr.max_lr), greater_than(0)},
      {"train.lr.min_lr", "--min-lr", kJob, "learning rate at the end of the cosine decay", HP_FIELD(r.train->lr.min_lr),
       at_least(0)},
      {"train.lr.warmup_init_lr", "--lr-warmup-init", kJob, "learning rate the linear warmup starts from",
       HP_FIELD(r.train->lr.warmup_init_lr), at_least(0)},
      {"train.lr.warmup_steps", "--warmup-steps", kJob, "linear warmup steps", HP_FIELD(r.train->lr.warmup_steps),
       at_least(0)},
      {"train.adam.beta1", "--adam-beta1", kJob, "AdamW beta1", HP_FIELD(r.train->adam.beta1), at_least(0).below(1)},
      {"train.adam.beta2", "--adam-beta2", kJob, "AdamW beta2", HP_FIELD(r.train->adam.beta2), at_least(0).below(1)},
      {"train.adam.eps", "--adam-eps", kJob, "AdamW epsilon", HP_FIELD(r.train->adam.eps), greater_than(0)},
      {"train.adam.weight_decay", "--weight-decay", kJob, "AdamW weight decay", HP_FIELD(r.train->adam.weight_decay),
       at_least(0)},
      {"train.clip_grad", "--clip-grad", kJob, "global gradient-norm clip (0 = off)", HP_FIELD(r.train->clip_grad),
       at_least(0)},
      {"train.grad_accum", "--grad-accum", kJob, "pipeline runs per optimizer step", HP_FIELD(r.train->grad_accum),
       at_least(1)},
      {"train.distributed_optimizer", "--use-distributed-optimizer", kJob,
       "shard the AdamW state over the --dp (x --cp) ranks (ZeRO-1)", HP_FIELD(r.train->distributed_optimizer)},
      {"data.data", "--data", kJob,
       "embedded, text:PATH, u16:PATH[:VOCAB], u32:PATH[:VOCAB], a Megatron indexed dataset PREFIX (PREFIX.bin + "
       "PREFIX.idx) or a blend \"W1 PREFIX1 W2 PREFIX2 ...\"",
       HP_FIELD(r.data->data)},
      {"data.tokenizer_model", "--tokenizer-model", kJob,
       "the SentencePiece model the data was tokenized with: --vocab comes from it (a --vocab given must agree), "
       "and checkpoints record it for generate's text in and out",
       HP_FIELD(r.data->tokenizer_model), {}, "", false},
      {"data.split", "--split", kJob,
       "train,validation,test weights over a Megatron dataset's documents (default 969,30,1); the validation part "
       "is the held-out data",
       HP_FIELD(r.data->split), {}, "", false},
      {"data.eval_data", "--eval-data", kJob,
       "held-out tokens (same forms as --data); default: the embedded corpus's held-out tail",
       HP_FIELD(r.data->eval_data), {}, "", false},
      {"train.save", "--save", kJob, "checkpoint directory (written at the end)", HP_FIELD(r.train->save),
       {}, "", false},
      {"train.save_interval", "--save-interval", kJob, "also checkpoint every N steps", HP_FIELD(r.train->save_interval),
       at_least(0)},
      {"train.keep.keep_last", "--keep-last", kJob,
       "keep the newest N checkpoints (0 = all); never the one latest names", HP_FIELD(r.train->keep.keep_last),
       at_least(0)},
      {"train.keep.keep_every", "--keep-every", kJob, "with --keep-last: also keep the steps that are multiples of K",
       HP_FIELD(r.train->keep.keep_every), at_least(0)},
      {"train.save_failures", "--save-failures", kJob, "a failed save: stop (the job fails) or continue (warn, train on)",
       HP_FIELD(r.train->save_failures), one_of({"stop", "continue"})},
      {"train.load", "--load", kJob, "resume from this checkpoint directory", HP_FIELD(r.train->load), {}, "", false},
      {"export.output", "--output", kCheckpoint, "the weights file to write (a .json of the model's configuration beside it)",
       HP_FIELD(r.exporting->output), {}, "", false},
      {"export.format", "--format", kCheckpoint, "torch (Python's torch.load reads a dict of tensors) or safetensors",
       HP_FIELD(r.exporting->format), one_of({"torch", "safetensors"})},
      {"train.init_from", "--init-from", kTrain,
       "start a new run from weights that hyperpipe checkpoint export wrote (torch or safetensors; any layout)",
       HP_FIELD(r.train->init_from), {}, "", false},
      {"train.metrics", "--metrics", kJob, "JSON lines, one per step", HP_FIELD(r.train->metrics), {}, "", false},
      {"train.trace.chrome", "--trace", kJob, "the last step, measured on every rank, as one Chrome trace JSON",
       HP_FIELD(r.train->trace.chrome), {}, "", false},
      {"train.trace.timeline", "--timeline", kJob, "the last step, measured, as an SVG timeline (one pipeline)",
       HP_FIELD(r.train->trace.timeline), {}, "", false},
      {"train.trace.simulate", "--simulate", kJob,
       "with --timeline: the simulated step, from the measured costs, below it", HP_FIELD(r.train->trace.simulate)},
      {"train.eval_interval", "--eval-interval", kJob, "held-out loss every N steps and after the last (0 = never)",
       HP_FIELD(r.train->eval_interval), at_least(0)},
      {"train.eval_iters", "--eval-iters", kJob, "held-out batches per evaluation", HP_FIELD(r.train->eval_iters),
       at_least(1)},
      {"train.log_interval", "--log-interval", kJob, "steps between log lines (no TTY)",
       HP_FIELD(r.train->log_interval), at_least(1)},
      {"executor.pseudo_deallocate", "--pseudo-deallocate", kRun, "free sent activations' storage",
       HP_FIELD(r.executor->pseudo_deallocate)},
      {"train.fault", "--inject-fault", kJob,
       "testing: RANK:STEP:" + train::fault_kind_names("|") + "[:START|every] makes that rank fail at that step "
       "(nospace, killsave: in its save) in the job's first start (START: after that many restarts; every: each)",
       HP_FIELD(r.values->fault), {}, "", false},
      {"verify.tolerance", "--tolerance", kVerify, "largest relative error accepted", HP_FIELD(r.values->tolerance),
       at_least(0)},

      // bench's measurements
      {"bench.overhead", "--overhead", kBench,
       "also break one traced step per rank into compute, waits, posts, the rest and an AdamW step",
       HP_FIELD(r.values->overhead)},
      {"bench.profile_ops", "--profile-ops", kBench,
       "also profile one step per schedule with LibTorch's profiler: each rank prints its N operators with the most "
       "self time",
       HP_FIELD(r.values->profile_ops), at_least(0)},
      {"bench.comm", "--comm", kBench,
       "also time src/comm's messages (4 KiB to 16 MiB, rank 0 <-> 1) and broadcasts against plain c10d Gloo",
       HP_FIELD(r.values->comm)},
      {"bench.comm_rounds", "--comm-rounds", kBench, "rounds of --comm (each times every size on every path once)",
       HP_FIELD(r.values->comm_rounds), at_least(1)},
      {"bench.json", "--json", kBench, "also write the results as JSON", HP_FIELD(r.values->json), {}, "", false},

      // generate
      {"generate.load", "--load", kGenerate, "checkpoint directory (any training layout)", HP_FIELD(r.values->load), {},
       "train.load", false},
      {"generate.prompt", "--prompt", kGenerate, "the text to continue (byte tokens)", HP_FIELD(r.values->prompt),
       {}, "",
       false},
      {"generate.prompts_file", "--prompts", kGenerate,
       "a file of prompts, one per line, decoded together as micro-batches", HP_FIELD(r.values->prompts_file), {}, "",
       false},
      {"generate.images", "--image", kGenerate,
       "VL checkpoints: an image to caption, a held-out synthetic image's index or a PPM (P6) file; repeat for "
       "several, decoded together as micro-batches",
       HP_FIELD(r.values->images), {}, "", false},
      {"generate.max_new_tokens", "--max-new-tokens", kGenerate, "tokens to add to each prompt (VL: a caption's 7 words)",
       HP_FIELD(r.generate->max_new_tokens), at_least(1)},
      {"sampling.temperature", "--temperature", kGenerate, "0 = greedy; else sample softmax(logits / T)",
       HP_FIELD(r.generate->sampling.temperature), at_least(0)},
      {"sampling.top_k", "--top-k", kGenerate, "sample among the K likeliest tokens (0 = all)",
       HP_FIELD(r.generate->sampling.top_k), at_least(0)},
      {"sampling.seed", "--seed", kGenerate, "seed of the sampler", HP_FIELD(r.generate->sampling.seed)},
      {"generate.no_kv_cache", "--no-kv-cache", kGenerate, "recompute the whole prefix at every token (no KV cache)",
       HP_FIELD(r.values->no_kv_cache)},
  };
#undef HP_FIELD
}

}  // namespace hp::cli
