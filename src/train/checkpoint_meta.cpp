#include "train/checkpoint_meta.hpp"

#include <cstdint>
#include <exception>

#include "train/checkpoint_error.hpp"
#include "train/durable_file.hpp"

namespace hp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

}  // namespace

std::string meta_checksum(json meta) {
  meta.erase("checksum");
  return crc_hex(crc32_of(meta.dump(1)));
}

json read_meta(const std::string& path, const fs::path& step_dir) {
  const fs::path file = step_dir / "meta.json";
  json meta;
  try {
    meta = json::parse(read_text(file));
  } catch (const json::exception& e) {
    bad_load(path, cat(file.string(), " is corrupt or truncated (not valid JSON: ", e.what(), ")"));
  } catch (const std::exception& e) {
    bad_load(path, cat("cannot read ", file.string(), ": ", e.what()));
  }
  if (!meta.is_object() || meta.value("format", "") != kCheckpointFormat)
    bad_load(path, cat(file.string(), " is not a ", kCheckpointFormat, " file"));
  const int version = meta.value("version", 0);
  if (version != 1 && version != kCheckpointVersion)
    bad_load(path, cat(file.string(), " has version ", meta.value("version", json()).dump(), "; this build reads 1 and ",
                       kCheckpointVersion));
  if (version >= 2) {
    const std::string want = meta.value("checksum", "");
    const std::string got = meta_checksum(meta);
    if (want != got)
      bad_load(path, cat(file.string(), " is corrupt (its CRC-32 is ", got, ", it records ", want.empty() ? "none" : want, ")"));
  }
  return meta;
}

std::string read_shard(const std::string& path, const fs::path& step_dir, const json& meta, const std::string& name) {
  const fs::path file = step_dir / name;
  std::error_code ec;
  if (!fs::exists(file, ec)) bad_load(path, cat(file.string(), " is missing"));
  std::string bytes;
  try {
    bytes = read_text(file);
  } catch (const std::exception& e) {
    bad_load(path, e.what());
  }
  if (!meta.contains("files")) return bytes;  // version 1
  const auto it = meta.at("files").find(name);
  if (it == meta.at("files").end()) bad_load(path, cat(file.string(), " has no checksum in meta.json"));
  const auto want_bytes = it->at("bytes").get<std::uint64_t>();
  if (bytes.size() < want_bytes)
    bad_load(path, cat(file.string(), " is truncated (", bytes.size(), " of ", want_bytes, " bytes)"));
  if (bytes.size() != want_bytes)
    bad_load(path, cat(file.string(), " has ", bytes.size(), " bytes, meta.json records ", want_bytes));
  const std::string want = it->at("crc32").get<std::string>();
  const std::string got = crc_hex(crc32_of(bytes));
  if (got != want) bad_load(path, cat(file.string(), " is corrupt (its CRC-32 is ", got, ", meta.json records ", want, ")"));
  return bytes;
}

}  // namespace hp::train
