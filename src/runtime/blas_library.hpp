// Which BLAS this process's matrix products run on. Debian's LibTorch is
// built with BLAS_INFO=generic and calls whatever libblas.so.3 the dynamic
// loader found (the alternatives system's choice, or LD_LIBRARY_PATH's), so
// the same binary is several times faster or slower depending on it; train
// and bench name it in their first lines.
//
// Contract: reads the loaded libraries only (dlsym of sgemm_/dgemm_ in the
// global scope, where LibTorch's calls resolve); loads nothing, thread-safe,
// cheap enough to call once per command.
#pragma once

#include <string>

namespace hp::runtime {

struct BlasLibrary {
  std::string name;        // "OpenBLAS 0.3.21 (OpenMP, SkylakeX kernels)", "reference BLAS (netlib)", ...
  std::string path;        // the file defining dgemm_, links resolved; empty when none is loaded
  bool reference = false;  // netlib's unoptimised implementation
  bool found() const { return !path.empty(); }
};

BlasLibrary detect_blas();

// "BLAS: <name> from <path>", the line train and bench print first.
std::string blas_line(const BlasLibrary& b);

// One warning line when the products run on the reference BLAS (naming the
// package to install), else empty.
std::string blas_warning(const BlasLibrary& b);

}  // namespace hp::runtime
