// Checkpoints: one directory per saved step, one shard per pipeline rank,
// keyed by GLOBAL parameter names, so a checkpoint saved with PP=4 loads under
// PP=2 or PP=1.
//
// Layout of DIR (the --save / --load directory):
//   DIR/latest              "step-<N>\n": the checkpoint load picks (written to latest.tmp, renamed)
//   DIR/step-<N>/meta.json  step, world_size, shards, optimizer_step, the caller's metadata,
//                           "params": {name: {"shard": i, "shape": [...], "dtype": "Float",
//                           "adam_state": true}} for every parameter, "files": {"rank-<r>.pt":
//                           {"bytes": n, "crc32": "89abcdef"}} and "checksum": the CRC-32 of
//                           meta.json itself (of its text with "checksum" left out, as dump(1)
//                           writes it). Version 1 files (no checksums) still load, unverified.
//   DIR/step-<N>/rank-<r>.pt   flat torch::serialize archive: one entry per parameter under its
//                           global name; "adam.exp_avg.<name>", "adam.exp_avg_sq.<name>",
//                           "adam.step.<name>" (int64 scalar); scalars "adam.step",
//                           "checkpoint.step", "checkpoint.rank", "checkpoint.world_size"
//   DIR/step-<N>/rank-<r>.json the shard's manifest (names, shapes, dtypes), read by finalize
//
// Save protocol (save_checkpoint composes it; tests may call the parts):
//   1. every rank: write_checkpoint_shard() -> DIR/step-<N>.tmp/rank-<r>.{pt,json}
//   2. barrier
//   3. rank 0: finalize_checkpoint(): meta.json into the .tmp dir, rename the .tmp dir to
//      DIR/step-<N> (an existing DIR/step-<N> is swapped out atomically with renameat2
//      RENAME_EXCHANGE where the filesystem allows, else moved to step-<N>.old first, and
//      deleted after), then DIR/latest, then delete stale step-*.tmp / step-*.old dirs
//   4. barrier
// Every file is written under a temporary name and renamed, and fsynced. A write that fails
// (disk full, read-only, missing directory) says which file, how many of its bytes were written
// and why, and removes that temporary file. A save killed at any
// point leaves DIR/latest naming the previous complete checkpoint: load never reads *.tmp dirs.
// A parameter held by several ranks (a tied embedding copy) is read from the lowest rank.
//
// Contract: the functions are blocking and single-threaded per rank; all ranks must use the
// same dir, step and world_size. A rank that fails throws (the others then fail at the barrier,
// whose timeout is the runtime's). Tensors are saved on the CPU and loaded to the dtype and
// device of the tensors the caller says it needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/tensor_shard.hpp"
#include "train/adamw.hpp"
#include "train/named_params.hpp"

namespace hp::train {

using Barrier = std::function<void()>;

// Step 1. Throws std::invalid_argument for bad arguments ("--save ..."), std::runtime_error for
// I/O failures.
void write_checkpoint_shard(const std::string& dir, std::int64_t step, int rank, int world_size,
                            const NamedParams& params, const AdamWState& optimizer);

// Step 3 (rank 0, after every shard exists). metadata_json: any JSON text, or "" for none.
// Throws std::runtime_error naming a missing or inconsistent shard.
void finalize_checkpoint(const std::string& dir, std::int64_t step, int world_size,
                         const std::string& metadata_json);

// Steps 1-4. barrier may be empty only when world_size == 1.
void save_checkpoint(const std::string& dir, std::int64_t step, int rank, int world_size,
                     const NamedParams& params, const AdamWState& optimizer,
                     const std::string& metadata_json, const Barrier& barrier);

// What a checkpoint directory keeps after a save (--keep-last, --keep-every): the newest
// keep_last complete checkpoints (0: all), every step that is a multiple of keep_every (0: none
// besides those), and always the one DIR/latest names.
struct CheckpointRetention {
  int keep_last = 0;
  std::int64_t keep_every = 0;
};

// Removes the complete checkpoints of dir that `keep` does not keep (each is renamed to
// step-<N>.old first, so a kill leaves nothing a load would read; the next save deletes it).
// Returns the removed step numbers. Call only after the newest checkpoint is complete.
std::vector<std::int64_t> prune_checkpoints(const std::string& dir, const CheckpointRetention& keep);

// Testing: called before each write of a checkpoint file; returning an errno value (ENOSPC)
// makes the write fail with it once `offset` bytes of the file are written. Empty: none.
using WriteFault = std::function<int(const std::string& file, std::size_t offset, std::size_t size)>;
void set_checkpoint_write_fault(WriteFault fault);

// One rank's part of a collective outcome: returns true when every rank passed ok = true.
using Agree = std::function<bool(bool ok)>;

struct SaveOutcome {
  bool ok = true;
  std::string error;  // this rank's failure in one line ("" when ok or when another rank failed)
};

// save_checkpoint for a job that must survive a failed save: every rank writes its shard, the
// ranks agree (agree may be empty when world_size == 1), rank 0 finalizes and prunes, and they
// agree again. A failure anywhere makes every rank return ok = false, with the temporary files
// removed and DIR/latest as it was. Bad arguments still throw std::invalid_argument.
SaveOutcome try_save_checkpoint(const std::string& dir, std::int64_t step, int rank, int world_size,
                                const NamedParams& params, const AdamWState& optimizer,
                                const std::string& metadata_json, const Agree& agree,
                                const CheckpointRetention& keep = {});

// Before a job starts: dir exists or can be created and a file can be written in it. Throws
// std::invalid_argument "--save DIR: ..." naming why not.
void check_checkpoint_dir_writable(const std::string& dir);

// The step directory a load of `path` reads: path itself when it holds meta.json, else the
// directory named by path/latest. Throws std::invalid_argument "--load PATH: ..." when there is
// none, when latest names a directory without meta.json, or for a *.tmp / *.old directory.
std::string resolve_checkpoint(const std::string& path);

// For resuming: the resolved step directory of dir, or nullopt when dir holds no checkpoint
// (no meta.json and no latest, or dir does not exist). A broken latest still throws.
std::optional<std::string> latest_checkpoint(const std::string& dir);

struct LoadedCheckpoint {
  std::string path;           // the step directory that was read
  std::int64_t step = 0;
  int world_size = 0;         // of the run that saved it
  std::string metadata_json;  // as given to save ("" when none)
  NamedParams params;         // every needed name, converted to the needed tensor's dtype/device
  AdamWState optimizer;       // step, and the state of the needed names that have one
};

// Reads the needed names (the tensors give the expected shape, dtype and device) from whichever
// shards hold them. Throws std::invalid_argument "--load PATH: checkpoint has no parameter X
// (...)" for a missing name and "--load PATH: parameter X has shape [..] in the checkpoint but
// [..] in this model" for a shape mismatch.
LoadedCheckpoint load_checkpoint(const std::string& path, const NamedParams& needed);

// What meta.json says of a checkpoint, without reading a tensor (hyperpipe
// checkpoint ls): every parameter by global name, with its shape, dtype, the
// shard that holds it and whether it has optimizer state. Throws
// std::invalid_argument naming the path when it is not a checkpoint.
struct CheckpointEntry {
  std::string name;
  std::vector<std::int64_t> shape;
  std::string dtype;
  int shard = 0;
  bool optimizer_state = false;
};
struct CheckpointInfo {
  std::string path;  // the step directory
  std::int64_t step = 0;
  int world_size = 0;
  std::string metadata_json;
  std::vector<CheckpointEntry> params;  // sorted by name
};
// meta.json's checksum is verified (std::invalid_argument "--load PATH: FILE is corrupt ...").
CheckpointInfo read_checkpoint_info(const std::string& path);

// read_checkpoint_info, then every shard is checked against meta.json: present, of the recorded
// size and CRC-32. Reads every byte; meant for before any rank starts. Throws
// std::invalid_argument in one line naming the file: "--load PATH: FILE is missing",
// "... is truncated (N of M bytes)", "... is corrupt (CRC-32 ...)".
CheckpointInfo verify_checkpoint(const std::string& path);

// `params` with each tensor-parallel shard (named in `shards`) replaced by an
// uninitialised tensor of its whole shape: what a file of whole tensors holds
// for them (restore_checkpoint, weights_file's init_from_weights).
NamedParams unsharded_like(const NamedParams& params, const runtime::TensorShards& shards, int tp_size);

// load_checkpoint(path, params); then, when optimizer is not null, loads its state (which
// validates it); then copies the values into the live params in place (under no-grad). Nothing
// is modified when a check fails. Returns the loaded checkpoint. Tensor parallelism: the
// params named in `shards` are this rank's shard (tp_rank of tp_size) of a whole tensor, which
// the checkpoint holds; they and their optimizer state get their shard of it.
LoadedCheckpoint restore_checkpoint(const std::string& path, const NamedParams& params, AdamW* optimizer,
                                    const runtime::TensorShards& shards = {}, int tp_rank = 0, int tp_size = 1);

}  // namespace hp::train
