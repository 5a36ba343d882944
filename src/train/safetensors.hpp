// The safetensors format as Hugging Face specifies it: an 8-byte
// little-endian header length N, N bytes of JSON header
//   {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ...,
//    "__metadata__": {"key": "text", ...}}
// (padded with spaces to a multiple of 8), then the byte buffer: each
// tensor's values row-major and little-endian, at [BEGIN, END) of the buffer,
// the tensors back to back, covering it whole. No Debian package offers it,
// so the small writer and reader are here. LibTorch-free: values are bytes.
//
// Contract: read_safetensors checks everything the spec requires (header
// within the file, valid JSON, known dtypes, offsets in order, in range,
// non-overlapping, covering the buffer, END - BEGIN = elements x size) and
// throws std::invalid_argument "PATH: ..." in one line otherwise.
// write_safetensors writes PATH.tmp, fsyncs and renames it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hp::train {

struct SafeTensor {
  std::string name;
  std::string dtype;  // "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"
  std::vector<std::int64_t> shape;
  std::string data;   // the values' bytes, little-endian, row-major
};

// Bytes per element of a safetensors dtype; 0 for an unknown one.
int safetensors_dtype_size(const std::string& dtype);

// Tensors are written in the given order.
void write_safetensors(const std::string& path, const std::vector<SafeTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// with_data false: the header alone, every check made, each SafeTensor's data
// left empty (a check before a job starts, which reads the data later).
std::vector<SafeTensor> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata = nullptr,
                                         bool with_data = true);

}  // namespace hp::train
