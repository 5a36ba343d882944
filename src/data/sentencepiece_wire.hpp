// The conversation between a process and the SentencePiece helper
// (hyperpipe-sentencepiece, data/sentencepiece/main.cpp) over one stream
// socket. Why a helper process: Debian's libsentencepiece carries its own
// copy of protobuf-lite and exports its symbols; in a process that also loads
// LibTorch's libprotobuf they interpose each other and the process crashes
// before main (and dlopen with RTLD_DEEPBIND breaks iostreams instead). So
// no LibTorch process links SentencePiece: data/tokenizer.cpp starts the
// helper and talks to it.
//
//   serve MODEL: the helper answers Status{pieces, eos, unk} (or an error),
//     then, per request, 'E' + text -> ids, 'D' + ids -> text, until EOF.
//   train PREFIX VOCAB: the helper reads a count and that many documents,
//     trains, writes PREFIX.model and PREFIX.vocab, and answers ok or an error.
// Frames: a u8 tag or status, then u64-length-prefixed bytes or int32 arrays,
// in the machine's byte order (both ends run on one machine).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hp::data::wire {

// Whole-buffer reads and writes; false on EOF or an error. Writes never raise
// SIGPIPE (the stream is a socket written with MSG_NOSIGNAL where possible).
bool write_all(int fd, const void* data, std::size_t n);
bool read_all(int fd, void* data, std::size_t n);

bool write_u8(int fd, std::uint8_t v);
bool read_u8(int fd, std::uint8_t& v);
bool write_bytes(int fd, const std::string& s);
bool read_bytes(int fd, std::string& s);
bool write_ids(int fd, const std::vector<int>& ids);
bool read_ids(int fd, std::vector<int>& ids);

}  // namespace hp::data::wire
