/* bench/sgemm_timer.c: how long a process's matrix products take where they run.
 *
 * An LD_PRELOAD shim over BLAS's sgemm_, the call through which LibTorch's CPU mm, addmm and
 * bmm and hyperpipe's fused attention reach the BLAS (float32). It times each call with the
 * monotonic clock (tens of nanoseconds against calls of tens of microseconds and more) and, at
 * exit, when SGEMM_TIMER_OUT is set and the process made any call, writes each call's start and
 * end in nanoseconds, one call per line in the order the calls ended, to
 * "$SGEMM_TIMER_OUT.<pid>". bench/eager_compare.py builds it with cc and preloads it into both
 * sides, so each step splits into its products, timed in place, and everything else.
 *
 * Thread-safe: fused attention calls it from several threads at once, so the reader counts
 * the time covered by any call (the union of the intervals), not their sum. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*sgemm_fn)(const char*, const char*, const int*, const int*, const int*, const float*,
                         const float*, const int*, const float*, const int*, const float*, float*, const int*);

static sgemm_fn real_sgemm;
static pthread_once_t found = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long long* intervals; /* start, end of each call */
static size_t count, capacity;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void find_real_sgemm(void) {
  /* Python loads LibTorch, and with it the BLAS, after this shim and not into the global scope. */
  real_sgemm = (sgemm_fn)dlsym(RTLD_NEXT, "sgemm_");
  if (!real_sgemm) real_sgemm = (sgemm_fn)dlsym(dlopen("libblas.so.3", RTLD_LAZY | RTLD_NOLOAD), "sgemm_");
  if (!real_sgemm) {
    fprintf(stderr, "sgemm_timer: no sgemm_ to forward to\n");
    abort();
  }
}

void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  pthread_once(&found, find_real_sgemm);
  const long long start = now_ns();
  real_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const long long end = now_ns();
  pthread_mutex_lock(&lock);
  if (count == capacity) {
    capacity = capacity ? 2 * capacity : 1 << 16;
    intervals = realloc(intervals, 2 * capacity * sizeof *intervals);
    if (!intervals) abort();
  }
  intervals[2 * count] = start;
  intervals[2 * count + 1] = end;
  ++count;
  pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void write_durations(void) {
  const char* out = getenv("SGEMM_TIMER_OUT");
  if (!out || count == 0) return;
  char path[4096];
  snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
  FILE* f = fopen(path, "w");
  if (!f) return;
  for (size_t i = 0; i < count; ++i) fprintf(f, "%lld %lld\n", intervals[2 * i], intervals[2 * i + 1]);
  fclose(f);
}
