#include "runtime/blas_library.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

namespace hp::runtime {
namespace {

template <typename F>
F symbol(void* handle, const char* name) {
  return reinterpret_cast<F>(dlsym(handle, name));
}

std::string resolved(const char* file) {
  char buf[PATH_MAX];
  return realpath(file, buf) ? std::string(buf) : std::string(file);
}

// The library's own name for itself, from the entry points each vendor adds
// beside the Fortran BLAS; empty for a library that only has the BLAS's
// (netlib's reference, and libraries this does not know).
std::string vendor_name(void* h) {
  if (auto config = symbol<const char* (*)()>(h, "openblas_get_config")) {
    std::string c = config();  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ... USE_OPENMP SkylakeX MAX_THREADS=64"
    std::string name = c.substr(0, c.find(' ', c.find(' ') + 1));
    std::string threads = "threading unknown";
    if (auto parallel = symbol<int (*)()>(h, "openblas_get_parallel")) {
      const int p = parallel();  // OpenBLAS's USE_OPENMP / USE_THREAD
      threads = p == 2 ? "OpenMP" : p == 1 ? "pthreads" : "single-threaded";
    }
    if (auto core = symbol<const char* (*)()>(h, "openblas_get_corename")) threads += std::string(", ") + core() + " kernels";
    return name + " (" + threads + ")";
  }
  if (auto version = symbol<void (*)(char*, int)>(h, "mkl_get_version_string")) {
    char buf[256] = {};
    version(buf, sizeof buf);
    return buf;
  }
  if (auto version = symbol<const char* (*)()>(h, "bli_info_get_version_str")) return std::string("BLIS ") + version();
  if (symbol<void*>(h, "ATL_buildinfo")) return "ATLAS";
  return "";
}

}  // namespace

BlasLibrary detect_blas() {
  BlasLibrary b;
  void* gemm = dlsym(RTLD_DEFAULT, "dgemm_");
  if (!gemm) gemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info{};
  if (!gemm || !dladdr(gemm, &info) || !info.dli_fname) {
    b.name = "none loaded";
    return b;
  }
  b.path = resolved(info.dli_fname);
  // RTLD_NOLOAD: a handle on the library already mapped, to ask it its name.
  if (void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
    b.name = vendor_name(h);
    dlclose(h);
  }
  if (b.name.empty()) {
    // Debian installs netlib's reference as .../blas/libblas.so.3; a library
    // with no vendor entry points elsewhere is named by its file alone.
    const std::string dir = b.path.substr(0, b.path.rfind('/'));
    b.reference = dir.size() >= 5 && dir.compare(dir.size() - 5, 5, "/blas") == 0;
    b.name = b.reference ? "reference BLAS (netlib)" : "unknown BLAS";
  }
  return b;
}

std::string blas_line(const BlasLibrary& b) {
  return "BLAS: " + b.name + (b.found() ? " from " + b.path : "");
}

std::string blas_warning(const BlasLibrary& b) {
  if (!b.reference) return "";
  return "warning: matrix products run on the reference BLAS (" + b.path +
         "), several times slower than an optimised one: install libopenblas0-openmp "
         "(scripts/setup.sh does), which points libblas.so.3 at OpenBLAS";
}

}  // namespace hp::runtime
