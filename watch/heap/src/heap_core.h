/* The hook core of the host-heap interposer: the per-allocation table and the counters, shared by
 * every front end (glibc interposition in interpose_glibc.c, sanitizer hooks in
 * interpose_sanitizer.c, and later the `leakbound watch` LD_PRELOAD library, which compiles
 * heap_core.c too). Internal: not installed. Nothing here allocates or locks. */
#ifndef LEAKBOUND_WATCH_HEAP_CORE_H_
#define LEAKBOUND_WATCH_HEAP_CORE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LEAKBOUND_HEAP_HIDDEN __attribute__((visibility("hidden")))

#ifndef __cplusplus
#include <stdatomic.h>

/* The owner's add to a counter only its thread writes (others read it with atomic loads): a plain
 * read-modify-write, no lock prefix; one `add` to memory on x86-64, where a relaxed atomic load
 * and store compile to three instructions. Other architectures, and C compiled with
 * -fsanitize=thread (this project's TSan preset instruments C++ only), use the relaxed atomic load
 * and store, which ThreadSanitizer can see. */
static inline void LeakboundOwnerAdd(_Atomic int64_t* field, int64_t delta) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  __asm__("addq %1, %0" : "+m"(*(int64_t*)field) : "er"(delta));
#else
  atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) + delta,
                        memory_order_relaxed);
#endif
}

/* The same, subtracting (one `sub`, where an add of the negation is two instructions). */
static inline void LeakboundOwnerSub(_Atomic int64_t* field, int64_t delta) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  __asm__("subq %1, %0" : "+m"(*(int64_t*)field) : "er"(delta));
#else
  atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) - delta,
                        memory_order_relaxed);
#endif
}
#endif

/* glibc's own entry points, which the interposing front ends (interpose_glibc.c, the watch
 * preload's front_end.c) forward to: exported by libc, so no dlsym bootstrap is needed. */
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *block);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *block, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

/* What a front end learned when it took a block out of the table (realloc puts it back on
 * failure). found == 0: the block was not counted (excluded, allocated before the interposer,
 * or by another allocator). */
typedef struct LeakboundHeapTaken {
  int found;
  uint64_t size;
  uint32_t site;
  unsigned epoch; /* the census epoch the block was born in */
  /* OnFreeTaken: the freeing thread's counter slot + 1 while it has a slot of its own (0: the
   * shared slot, or unknown), for per-thread books kept beside the core's (the preload's call
   * sites). */
  uint32_t slot;
} LeakboundHeapTaken;

/* A block the allocator just returned: counted and recorded unless this thread is excluded or
 * counting is paused. For it and every OnAlloc* below, the block's address is 8-byte aligned, as
 * every allocator's is: the common path does not test it, and a free never finds a record made
 * for an unaligned address. */
LEAKBOUND_HEAP_HIDDEN void LeakboundHeapOnAlloc(const void* block, uint64_t size);
/* The same, with a call-site id stored in the record (returned by OnFreeTaken / Take; ids above
 * 2^16 - 1 are stored as 0). Returns 0 when the block was not recorded (excluded, paused, or
 * untracked), else the allocating thread's counter slot + 1 (1: the shared slot), so that
 * per-site books can follow the core's and be kept per thread like its counters. */
LEAKBOUND_HEAP_HIDDEN int LeakboundHeapOnAllocAt(const void* block, uint64_t size, uint32_t site);
/* OnAllocAt that also says the block's birth stamp (when it returns non-zero): the census
 * generation in bits 8..15 and the cohort in bits 0..7, as LeakboundHeapTaken.epoch gives it
 * back at the free. For books by birth cohort kept beside the core's (the call-site census). */
LEAKBOUND_HEAP_HIDDEN int LeakboundHeapOnAllocStamped(const void* block, uint64_t size,
                                                      uint32_t site, unsigned* stamp);
/* The common paths of OnAllocStamped and OnFreeTaken, all or nothing, for a front end that keeps
 * books of its own beside them (inlined into it by link-time optimisation). OnAllocFast: the
 * thread counts on a slot of its own, counting is on and the fast paths are not held
 * (LeakboundHeapHoldFastPath), the block's record is free in a mapped chunk, its size fits a
 * record: records and counts it, sets what OnAllocStamped would (*slot: the slot + 1; *stamp)
 * and returns 1; else does nothing and returns 0. OnFreeFast: 1 when it took the block's record (*taken as
 * OnFreeTaken fills it), 0 when the block was not recorded (nothing to do), -1 when it did
 * nothing (no slot of the thread's own, a large block: the caller takes OnFreeTaken). */
LEAKBOUND_HEAP_HIDDEN int LeakboundHeapOnAllocFast(const void* block, uint64_t size, uint32_t site,
                                                   unsigned* stamp, int* slot);
/* Says that records may hold call sites from now on; a front end that passes sites to
 * OnAllocFast calls it first (OnAllocFast then stores them without asking, and OnFree clears
 * them). Its blocks are then freed through OnFree, OnFreeTaken or OnFreeFast, which read the
 * site, never through OnFreeSiteless, which would leave it to the granule's next block. */
LEAKBOUND_HEAP_HIDDEN void LeakboundHeapSitesStored(void);
LEAKBOUND_HEAP_HIDDEN int LeakboundHeapOnFreeFast(const void* block, LeakboundHeapTaken* taken);
/* OnFreeFast for a front end whose records hold no call site (as OnFreeSiteless), with nothing
 * to give back: 1 when done (the record taken and booked, or none: nothing to do), 0 when it did
 * nothing (no slot of the thread's own, a large block: the caller takes OnFreeSiteless). A
 * front end's free can then keep its common path free of calls, and of a frame. */
LEAKBOUND_HEAP_HIDDEN int LeakboundHeapOnFreeFastSiteless(const void* block);
/* Holds the fast paths (hold 1) or lets them go (0): while held, OnAllocFast returns 0 and every
 * allocation takes the front end's general path, so that a front end with work of its own to do
 * on some allocations (the watch preload's job clock) tests for it there, not on the common path.
 * The core's general entries (OnAlloc, OnAllocAt, OnAllocStamped) and OnAllocFastInHold, which
 * that general path calls, record as if nothing were held. */
LEAKBOUND_HEAP_HIDDEN void LeakboundHeapHoldFastPath(int hold);
LEAKBOUND_HEAP_HIDDEN int LeakboundHeapOnAllocFastInHold(const void* block, uint64_t size,
                                                         uint32_t site, unsigned* stamp, int* slot);
/* The stamp a block allocated now would get (the census clock's generation and cohort). */
LEAKBOUND_HEAP_HIDDEN unsigned LeakboundHeapEpochNow(void);
/* A block about to be handed back to the allocator (call BEFORE the real free: once freed, the
 * address may be reused by another thread's malloc). Uncounted blocks are ignored. Its call site
 * leaves with it (read and cleared once any record stored one). */
LEAKBOUND_HEAP_HIDDEN void LeakboundHeapOnFree(const void* block);
/* OnFree of a block that holds no call site, which the caller knows (the watch preload's frees
 * while its call sites are off: they are switched on once and never off); skips OnFree's test. */
LEAKBOUND_HEAP_HIDDEN void LeakboundHeapOnFreeSiteless(const void* block);
/* OnFree that also returns what the record held (found, size, site) in the same step: a free
 * path that keeps per-site books needs no Take + ForgetTaken round trip. */
LEAKBOUND_HEAP_HIDDEN LeakboundHeapTaken LeakboundHeapOnFreeTaken(const void* block);
/* realloc: take the record out (no counter change), then either PutBack (the real realloc
 * failed, the block is still the caller's) or ForgetTaken (the old block is gone). */
LEAKBOUND_HEAP_HIDDEN LeakboundHeapTaken LeakboundHeapTake(const void* block);
LEAKBOUND_HEAP_HIDDEN void LeakboundHeapPutBack(const void* block, LeakboundHeapTaken taken);
/* Counts a taken block as freed (realloc moved it); returns the freeing thread's slot as
 * LeakboundHeapTaken.slot does (0: the shared slot, or nothing was taken). */
LEAKBOUND_HEAP_HIDDEN uint32_t LeakboundHeapForgetTaken(LeakboundHeapTaken taken);

/* Counter slots ever claimed: slots [1, used) are threads' own (LeakboundHeapTaken.slot). */
LEAKBOUND_HEAP_HIDDEN int LeakboundHeapSlotsUsed(void);
/* The largest number of slots (kThreadSlots). */
#define LEAKBOUND_HEAP_SLOTS 1024

/* Set once by the front end: NULL when its hooks receive the process's allocations, else the
 * reason they cannot (static storage). */
LEAKBOUND_HEAP_HIDDEN void LeakboundHeapSetFrontEnd(const char* mode, const char* unavailable);

#ifdef __cplusplus
}
#endif

#endif /* LEAKBOUND_WATCH_HEAP_CORE_H_ */
