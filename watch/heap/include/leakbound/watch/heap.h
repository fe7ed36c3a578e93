/* The exact host-heap interposer: C API (docs/heap.md).
 * Counts every malloc-family call of the process exactly, lock-free, with no allocation in the
 * hooks. Linked into the executables that run workloads (a shared library that defines malloc
 * ahead of glibc) and loaded with LD_PRELOAD by `leakbound watch`. */
#ifndef LEAKBOUND_WATCH_HEAP_H_
#define LEAKBOUND_WATCH_HEAP_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct leakbound_heap_stats {
  uint64_t live_bytes;        /* requested bytes of counted allocations not yet freed */
  uint64_t live_allocations;  /* counted allocations not yet freed */
  /* High-water mark since the last peak reset: the sum of each thread's own high-water mark, so
   * exact when one thread moves the heap between resets and an upper bound otherwise. */
  uint64_t peak_bytes;
  uint64_t total_allocations; /* counted allocations ever made */
  uint64_t total_bytes;       /* requested bytes ever allocated (counted; 0 in the watch preload's
                               * own copy of the core, whose samples carry none) */
  /* Allocations the interposer saw but could not record (an address above 2^47, a table region
   * that could not be mapped, or a single block >= 1 TiB): not in the figures above; 0 unless the
   * state says "degraded". */
  uint64_t untracked_allocations;
} leakbound_heap_stats;

/* 1 when the hooks are installed and counting (the interposer owns malloc, or the sanitizer
 * hooks are installed); 0 otherwise, with a reason from leakbound_heap_state(). */
int leakbound_heap_active(void);
/* "active", "active, degraded: ..." (see untracked_allocations), or "unavailable: <reason>".
 * Static storage. */
const char* leakbound_heap_state(void);
/* How the hooks are fed: "interposer" (this library defines malloc) or "sanitizer hooks"
 * (ASan/TSan own malloc; __sanitizer_install_malloc_and_free_hooks). Static storage. */
const char* leakbound_heap_mode(void);
/* Reads the counters: per-thread slots summed, each field read atomically, so the figures are
 * exact when no other thread is allocating or freeing (a sample point). */
void leakbound_heap_read(leakbound_heap_stats* out);
/* peak_bytes := live_bytes now. */
void leakbound_heap_reset_peak(void);

/* Thread-local exclusion: allocations made on this thread while the depth is > 0 are not
 * counted, and their frees (from any thread) do not decrement the counters. Nestable. */
void leakbound_heap_exclude_begin(void);
void leakbound_heap_exclude_end(void);
/* 1 when this thread is inside an exclusion. */
int leakbound_heap_excluded(void);

/* Process-wide switch (default on). Off: new allocations are neither counted nor recorded (the
 * hooks only forward); frees of blocks counted earlier still decrement, so the books stay exact.
 * For measuring the interposer's cost (bench_leakbound heap/ family). */
void leakbound_heap_set_counting(int on);
int leakbound_heap_counting(void);

/* The census of survivors by birth (docs/heap.md, "Census"). A census cuts time into cohorts:
 * cohort 0 starts at leakbound_heap_census_start() (or at process start), each
 * leakbound_heap_next_cohort() starts the next one. leakbound_heap_census() says, per cohort,
 * how many bytes and blocks born in it are still live: exact at a quiet point (no thread
 * allocating), read in O(threads x cohorts) with no walk over the heap. A block's cohort costs no
 * memory (it rides in the record's key). Cohorts past LEAKBOUND_HEAP_COHORTS - 2 share the last
 * one. One census at a time per process: the recorder (the Runner, the watch preload) owns it. */
#define LEAKBOUND_HEAP_COHORTS 255
typedef struct leakbound_heap_cohort {
  int64_t bytes;  /* requested bytes born in the cohort and still live */
  int64_t blocks; /* blocks born in the cohort and still live */
} leakbound_heap_cohort;
/* A new census: cohort 0 from now on. What was live before is in no cohort. */
void leakbound_heap_census_start(void);
/* Allocations from now on are born in the next cohort; returns its index. */
int leakbound_heap_next_cohort(void);
/* The cohort allocations are born in now. */
int leakbound_heap_cohort_now(void);
/* Fills out[0 .. min(n, capacity)) with the survivors of cohorts 0 .. now and returns
 * n = leakbound_heap_cohort_now() + 1. */
int leakbound_heap_census(leakbound_heap_cohort *out, int capacity);

#ifdef __cplusplus
} /* extern "C" */

namespace leakbound::watch {
/* RAII harness scope: what the harness allocates for itself is not counted. */
class HeapExclusion {
 public:
  HeapExclusion() { leakbound_heap_exclude_begin(); }
  ~HeapExclusion() { leakbound_heap_exclude_end(); }
  HeapExclusion(const HeapExclusion&) = delete;
  HeapExclusion& operator=(const HeapExclusion&) = delete;
};
}  // namespace leakbound::watch
#endif

#endif /* LEAKBOUND_WATCH_HEAP_H_ */
