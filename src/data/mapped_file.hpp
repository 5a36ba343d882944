// MappedFile: a whole file mapped read-only, unmapped when it goes; the one
// place the token files and Megatron's indexed datasets map their bytes.
//
// Contract: immutable once made; reads are const and thread-safe. Failures
// are std::invalid_argument "data.data PATH: ..." in one line.
#pragma once

#include <cstddef>
#include <string>

namespace hp::data {

class MappedFile {
 public:
  // `what` names the file in messages ("cannot open the token file (...)").
  // An empty file maps to data() == nullptr, size() == 0.
  MappedFile(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return static_cast<const unsigned char*>(base_); }
  std::size_t size() const { return bytes_; }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace hp::data
