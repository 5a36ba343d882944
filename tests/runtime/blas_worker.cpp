// Prints what runtime::detect_blas() finds in this process, for
// blas_library_test.cpp, which starts it with the libraries it should find.
#include <ATen/Parallel.h>

#include <iostream>

#include "runtime/blas_library.hpp"

int main() {
  const auto b = hp::runtime::detect_blas();
  // A LibTorch call keeps libtorch (and the libblas.so.3 it needs) linked in.
  std::cout << "threads " << at::get_num_threads() << "\n"
            << hp::runtime::blas_line(b) << "\nreference " << b.reference << "\n"
            << hp::runtime::blas_warning(b) << std::endl;
}
