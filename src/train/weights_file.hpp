// Weights files: the whole model's parameters under their global names, in
// a format the PyTorch world reads, written from a checkpoint of any layout
// or mesh (hyperpipe checkpoint export) and read back to start a run
// (train --init-from), under any layout or mesh.
//
//   torch        what LibTorch's pickle_save writes: Python's torch.load
//                returns a dict {name: tensor}
//   safetensors  Hugging Face's format (train/safetensors.hpp), metadata
//                {"format": "pt", "step": N}
//
// Beside FILE, FILE with the extension .json holds the model's configuration
// (the checkpoint's metadata: architecture flags, vocabulary, tokenizer),
// the step and the format.
//
// Contract: blocking, one thread; failures are std::invalid_argument in one
// line naming the option ("export.format", "train.init_from FILE: ...").
#pragma once

#include <cstdint>
#include <string>

#include "runtime/tensor_shard.hpp"
#include "train/named_params.hpp"

namespace hp::train {

struct ExportOptions {
  std::string output;                // --output FILE
  std::string format = "safetensors";  // --format torch | safetensors
};

struct ExportReport {
  std::string config;  // the .json written beside the output
  std::int64_t step = 0, tensors = 0, values = 0;
};

// Reads every parameter of the checkpoint at `checkpoint` (a --save directory
// or one step directory; every shard's size and CRC-32 checked first).
ExportReport export_weights(const std::string& checkpoint, const ExportOptions& o);

// Every tensor of a weights file of either format (told by its first bytes),
// on the CPU.
NamedParams read_weights(const std::string& path);

// Before a job starts: the file opens and is of a known format; a
// safetensors file's header passes every check, and a torch file's zip
// directory holds its pickle, without reading the tensors of either.
// Throws std::invalid_argument naming train.init_from.
void check_weights_file(const std::string& path);

// Copies the file's tensors into `params` (each rank its own; a tensor-parallel
// rank its shard of the whole tensor the file holds). Nothing is copied when a
// name is missing or a shape differs: that throws, naming the first such one.
void init_from_weights(const std::string& path, const NamedParams& params, const runtime::TensorShards& shards,
                       int tp_rank, int tp_size);

}  // namespace hp::train
