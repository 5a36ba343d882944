// Durable files: how a checkpoint puts its bytes on disk so that a crash, a
// full disk or a kill at any point leaves either the old file or the new one,
// never a torn one, and how it recognises a damaged one later (CRC-32).
//
// A file is written under "<name>.tmp", fsynced, then renamed over <name>;
// the rename only becomes durable once the directory is fsynced too, which is
// the caller's step (fsync_path(dir, true)), because one directory sync covers
// all the files written into it. A failed write throws std::runtime_error in
// one line naming the file, how many of its bytes were written and the errno
// text, having removed the temporary file: a retry finds nothing to clean.
// Every write consults the test hook of set_checkpoint_write_fault
// (checkpoint.hpp), which is why that hook is defined here.
//
// Contract: blocking; the write hook is process-wide, so tests that set it
// write from one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace hp::train {

// fsync of a written file or of a directory's entries; errors are reported, not ignored.
void fsync_path(const std::filesystem::path& p, bool directory);

// "<p>.tmp": where p is written before it is renamed into place.
std::filesystem::path tmp_sibling(const std::filesystem::path& p);

// Writes text to tmp_sibling(path), fsyncs it and renames it to path.
void write_text_atomic(const std::filesystem::path& path, const std::string& text);

// The whole file, as bytes.
std::string read_text(const std::filesystem::path& path);

// zlib's CRC-32 of data, and as meta.json spells it: 8 lowercase hex digits.
std::uint32_t crc32_of(const std::string& data);
std::string crc_hex(std::uint32_t crc);

}  // namespace hp::train
