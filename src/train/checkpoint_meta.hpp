// meta.json, the index of one checkpoint (its fields: checkpoint.hpp), as a
// load trusts it: it must say it is a hyperpipe checkpoint of a version this
// build reads, and its own CRC-32 and each shard's size and CRC-32 must match,
// so that a truncated or bit-flipped file is refused by name before any of
// its bytes is parsed, rather than loading wrong weights or failing deep
// inside LibTorch's reader. Version 1 files (written before the checksums)
// still load, unverified.
//
// Contract: failures are std::invalid_argument "train.load PATH: ..." in one
// line naming the file (checkpoint_error.hpp). Pure reads; any thread.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace hp::train {

inline constexpr const char* kCheckpointFormat = "hyperpipe-checkpoint";
// Version 2 added the checksums ("files", "checksum"); version 1 still loads, unverified.
inline constexpr int kCheckpointVersion = 2;

// The checksum of meta.json: of the text dump(1) writes for it without the "checksum" key
// (nlohmann keeps keys sorted, so the text is a function of the content).
std::string meta_checksum(nlohmann::json meta);

// meta.json of a step directory, its checksum verified (version 2), in one line on failure.
// path: what the user asked to load, for messages.
nlohmann::json read_meta(const std::string& path, const std::filesystem::path& step_dir);

// A shard file's bytes, checked against meta.json's size and CRC-32 when it records them.
std::string read_shard(const std::string& path, const std::filesystem::path& step_dir, const nlohmann::json& meta,
                       const std::string& name);

}  // namespace hp::train
