/* Front end of the host-heap interposer for a plain build: defines the malloc family ahead of
 * glibc (this library is a DT_NEEDED of the executable, or LD_PRELOADed) and forwards to glibc's
 * exported __libc_* entry points, so no dlsym bootstrap (and no static calloc buffer) is needed.
 * C++ new/delete reach these through libstdc++. Sizes counted are the requested ones. */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "heap_core.h"

#define LB_EXPORT __attribute__((visibility("default")))

/* The dynamic loader's own allocations (the TLS vector of each new thread, which glibc keeps
 * with its cache of exited threads' stacks for the life of the process) are the loader's, not
 * the program's: a workload that starts threads would otherwise never return to its baseline.
 * The loader's text range is found once, at load time; the hooks compare the caller with it. */
static uintptr_t g_loader_begin, g_loader_end;

static int FindLoader(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  if (info->dlpi_name == NULL || strstr(info->dlpi_name, "/ld-linux") == NULL) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    g_loader_begin = info->dlpi_addr + ph->p_vaddr;
    g_loader_end = g_loader_begin + ph->p_memsz;
  }
  return 1;
}

static inline int FromLoader(const void* caller) {
  const uintptr_t at = (uintptr_t)caller;
  return __builtin_expect(at - g_loader_begin < g_loader_end - g_loader_begin, 0);
}

/* Records a block unless the loader asked for it. */
static inline void Count(const void* block, uint64_t size, const void* caller) {
  if (FromLoader(caller)) return;
  LeakboundHeapOnAlloc(block, size);
}

LB_EXPORT void* malloc(size_t size) {
  void* block = __libc_malloc(size);
  if (block) Count(block, size, __builtin_return_address(0));
  return block;
}

LB_EXPORT void free(void* block) {
  if (!block) return;
  LeakboundHeapOnFree(block);
  __libc_free(block);
}

LB_EXPORT void* calloc(size_t count, size_t size) {
  void* block = __libc_calloc(count, size); /* NULL + ENOMEM on overflow: nothing counted */
  if (block) Count(block, (uint64_t)count * size, __builtin_return_address(0));
  return block;
}

/* realloc = free(old) + malloc(new) for the counters: the old block's bytes leave the books if
 * it was counted, the new one is counted unless this thread is excluded. On failure the old
 * block is untouched and so are the counters. glibc's realloc(p, 0) frees p and returns NULL. */
LB_EXPORT void* realloc(void* block, size_t size) {
  if (!block) {
    void* fresh = __libc_malloc(size);
    if (fresh) Count(fresh, size, __builtin_return_address(0));
    return fresh;
  }
  LeakboundHeapTaken taken = LeakboundHeapTake(block);
  void* moved = __libc_realloc(block, size);
  if (!moved && size != 0) {
    LeakboundHeapPutBack(block, taken);
    return NULL;
  }
  LeakboundHeapForgetTaken(taken);
  if (moved) Count(moved, size, __builtin_return_address(0));
  return moved;
}

LB_EXPORT void* reallocarray(void* block, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(block, bytes);
}

LB_EXPORT void* memalign(size_t alignment, size_t size) {
  void* block = __libc_memalign(alignment, size);
  if (block) Count(block, size, __builtin_return_address(0));
  return block;
}

/* glibc 2.36 aliases aligned_alloc to memalign (any alignment, rounded up to a power of two). */
LB_EXPORT void* aligned_alloc(size_t alignment, size_t size) { return memalign(alignment, size); }

LB_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
    return EINVAL;
  }
  void* block = __libc_memalign(alignment, size);
  if (!block) return ENOMEM;
  LeakboundHeapOnAlloc(block, size);
  *out = block;
  return 0;
}

LB_EXPORT void* valloc(size_t size) {
  void* block = __libc_valloc(size);
  if (block) LeakboundHeapOnAlloc(block, size);
  return block;
}

/* pvalloc promises a whole number of pages: the rounded size is what the caller may use, and
 * it is what is counted (as the sanitizers' pvalloc reports it too). */
LB_EXPORT void* pvalloc(size_t size) {
  size_t page = (size_t)getpagesize();
  void* block = __libc_pvalloc(size);
  if (block) LeakboundHeapOnAlloc(block, (size + page - 1) & ~(page - 1));
  return block;
}

/* The definitions above win only if this library precedes libc in the symbol search order.
 * Checked by effect, not by address: in a non-PIE executable that takes malloc's address in its
 * code (Debian's /usr/bin/python3), &malloc is the executable's canonical PLT stub, which
 * forwards here, so comparing it with our own definition would wrongly say "not ours". A probe
 * block allocated through the process's malloc must land in the table. */
__attribute__((constructor(102))) static void InitGlibcFrontEnd(void) {
  dl_iterate_phdr(FindLoader, NULL);
  void* (*volatile process_malloc)(size_t) = &malloc;
  void (*volatile process_free)(void*) = &free;
  void* probe = process_malloc(24);
  LeakboundHeapTaken taken = LeakboundHeapTake(probe);
  LeakboundHeapPutBack(probe, taken);
  process_free(probe);
  if (taken.found) {
    LeakboundHeapSetFrontEnd("interposer", NULL);
  } else {
    LeakboundHeapSetFrontEnd("interposer",
                             "unavailable: another malloc precedes libleakbound_heap in the "
                             "symbol search order (link it before libc, or LD_PRELOAD it)");
  }
}
