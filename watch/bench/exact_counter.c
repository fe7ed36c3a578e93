/* The references of watch/bench/overhead.sh: an exact counter of live heap bytes as an LD_PRELOAD
 * (the overhead issue's "20-line exact-counting preload"). Per-thread live bytes and blocks from
 * malloc_usable_size, no per-block record: it cannot say what was born when, nor the
 * requested sizes, nor where. What `leakbound watch` costs beyond it is the price of the census,
 * the exact requested sizes and the call sites. Built with -DFORWARD_ONLY it counts nothing and
 * only forwards: the floor of any LD_PRELOAD interposer (an extra call each way). Built with
 * -DFROM_HEADER it reads each block's size from glibc's chunk header instead of calling
 * malloc_usable_size: the cheapest exact counter (1.21x on the malloc loop where
 * malloc_usable_size's is 1.59x; docs/watch.md, "Overhead"). */
#define _GNU_SOURCE
#include <malloc.h>
#include <errno.h>
#include <stddef.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

/* Exported, so that the stores stay. */
__thread long exact_counter_live_bytes, exact_counter_live_blocks;

#ifdef FORWARD_ONLY
static inline void* Born(void* p) { return p; }
static inline void Died(void* p) { (void)p; }
#define Usable(p) 0L
#elif defined(FROM_HEADER)
/* glibc's chunk header, the word before the block: its size with 3 flag bits. A chunk's size does
 * not change while it is allocated, so what a free subtracts is what its malloc added: exact live
 * bytes (of chunks, not of requests) with one load from a line malloc has just touched, where
 * malloc_usable_size is a call that also reads the next chunk's header. glibc only. */
#define Usable(p) ((p) ? (long)(((const size_t*)(p))[-1] & ~(size_t)7) : 0L)
static inline void* Born(void* p) {
  if (p) exact_counter_live_bytes += Usable(p), ++exact_counter_live_blocks;
  return p;
}
static inline void Died(void* p) {
  if (p) exact_counter_live_bytes -= Usable(p), --exact_counter_live_blocks;
}
#else
#define Usable(p) ((p) ? (long)malloc_usable_size(p) : 0L)
static inline void* Born(void* p) {
  if (p) exact_counter_live_bytes += Usable(p), ++exact_counter_live_blocks;
  return p;
}
static inline void Died(void* p) {
  if (p) exact_counter_live_bytes -= Usable(p), --exact_counter_live_blocks;
}
#endif
void* malloc(size_t n) { return Born(__libc_malloc(n)); }
void* calloc(size_t k, size_t n) { return Born(__libc_calloc(k, n)); }
void* memalign(size_t a, size_t n) { return Born(__libc_memalign(a, n)); }
void* aligned_alloc(size_t a, size_t n) { return Born(__libc_memalign(a, n)); }
int posix_memalign(void** out, size_t a, size_t n) {
  void* p = __libc_memalign(a, n);
  if (!p) return ENOMEM; /* the alignment checks of a real one are left out */
  *out = Born(p);
  return 0;
}
void free(void* p) {
  Died(p);
  __libc_free(p);
}
void* realloc(void* p, size_t n) {
  const long was = Usable(p);
  void* moved = __libc_realloc(p, n);
#ifndef FORWARD_ONLY
  if (moved || n == 0) {
    exact_counter_live_bytes -= was, exact_counter_live_blocks -= p != NULL;
    Born(moved);
  }
#else
  (void)was;
#endif
  return moved;
}
