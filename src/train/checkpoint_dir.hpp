// The checkpoint directory (DIR of --save / --load) as a set of step
// directories: step-<N> is complete (it holds meta.json), step-<N>.tmp is a
// save under way and step-<N>.old one being replaced or removed, and the file
// DIR/latest names the complete one a load picks. A directory is renamed into
// or out of its complete name in one step, so a kill at any point leaves
// latest naming a complete checkpoint; a load never reads *.tmp or *.old, and
// the next save deletes them. The functions of checkpoint.hpp that work on
// whole directories (prune_checkpoints, check_checkpoint_dir_writable,
// resolve_checkpoint, latest_checkpoint) are defined with these.
//
// Contract: only rank 0 renames or removes step directories (finalize,
// prune), and only after every rank's shard is written; any rank may resolve
// and read. Blocking, single-threaded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hp::train {

// "step-<N>": the directory of step N's complete checkpoint.
std::string step_name(std::int64_t step);

// "step-<N>" as DIR/latest names it, or "" when there is none or it cannot be read.
std::string latest_name(const std::filesystem::path& root);

// Replaces final with tmp; final may exist (a re-save of the same step).
void install_dir(const std::filesystem::path& tmp, const std::filesystem::path& final);

// Deletes the step-*.tmp and step-*.old directories of root (what killed
// saves and prunes left) and returns their names; none where root does not exist.
std::vector<std::string> remove_stale_dirs(const std::filesystem::path& root);

}  // namespace hp::train
