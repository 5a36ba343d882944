/* bench/sgemm_timer.c: how long a process's matrix products take where they run.
 *
 * An LD_PRELOAD shim over BLAS's sgemm_, the call through which LibTorch's CPU mm, addmm and
 * bmm reach the BLAS (float32). It times each call with the monotonic clock (tens of
 * nanoseconds against calls of tens of microseconds and more) and, at exit, when
 * SGEMM_TIMER_OUT is set and the process made any call, writes each call's duration in
 * nanoseconds, one per line in call order, to "$SGEMM_TIMER_OUT.<pid>".
 * bench/eager_compare.py builds it with cc and preloads it into both sides, so each step
 * splits into its products, timed in place, and everything else.
 *
 * Not thread-safe: LibTorch calls the BLAS from the thread that runs the operator, and
 * these programs run their operators on one thread. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*sgemm_fn)(const char*, const char*, const int*, const int*, const int*, const float*,
                         const float*, const int*, const float*, const int*, const float*, float*, const int*);

static sgemm_fn real_sgemm;
static long long* durations;
static size_t count, capacity;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  if (!real_sgemm) {
    /* Python loads LibTorch, and with it the BLAS, after this shim and not into the global scope. */
    real_sgemm = (sgemm_fn)dlsym(RTLD_NEXT, "sgemm_");
    if (!real_sgemm) real_sgemm = (sgemm_fn)dlsym(dlopen("libblas.so.3", RTLD_LAZY | RTLD_NOLOAD), "sgemm_");
    if (!real_sgemm) {
      fprintf(stderr, "sgemm_timer: no sgemm_ to forward to\n");
      abort();
    }
  }
  const long long start = now_ns();
  real_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const long long took = now_ns() - start;
  if (count == capacity) {
    capacity = capacity ? 2 * capacity : 1 << 16;
    durations = realloc(durations, capacity * sizeof *durations);
    if (!durations) abort();
  }
  durations[count++] = took;
}

__attribute__((destructor)) static void write_durations(void) {
  const char* out = getenv("SGEMM_TIMER_OUT");
  if (!out || count == 0) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
  FILE* f = fopen(path, "w");
  if (!f) return;
  for (size_t i = 0; i < count; ++i) fprintf(f, "%lld\n", durations[i]);
  fclose(f);
}
