/* Front end of the `leakbound watch` preload: the malloc family (as watch/heap's glibc front
 * end, plus the call site of each allocation) and anonymous mmap/munmap/mremap as their own exact
 * counter. Forwards to glibc's __libc_* entry points (malloc) and to raw syscalls (mmap), so no
 * dlsym bootstrap is needed. The call site is __builtin_return_address(0) of the hook: one frame,
 * no unwinding, no allocation. The core (watch/heap/src/heap_core.c) keeps the block records and
 * stores the site in the record's 16-bit slot (LeakboundHeapOnAllocAt); a free gets it back in
 * the same step (LeakboundHeapOnFreeTaken). */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heap_core.h"
#include "leakbound/watch/heap.h"
#include "preload_internal.h"

/* The general allocation paths, out of line so that the common ones save no register and keep no
 * frame of locals. Each ends with the job clock's test (after the record: a sample there sees this
 * block), which the common paths leave out: while the clock is on, the heap's fast paths are held
 * (marker.c, LeakboundHeapHoldFastPath), so every allocation comes here. */

/* With call sites on: the common path again if only a hold stopped it, else the site's lookup
 * and books. */
static __attribute__((noinline)) void CountedAtSite(void* block, uint64_t size, uintptr_t pc) {
  if (!LeakboundSiteCountedFast(block, size, pc, 1)) {
    /* An excluded thread's allocation (the marker's) claims no site. */
    uint32_t site = leakbound_heap_excluded() ? 0 : LeakboundSiteFor(pc);
    unsigned stamp = 0;
    const int slot = LeakboundHeapOnAllocStamped(block, size, site, &stamp);
    if (slot && site) LeakboundSiteAlloc(site, (uint32_t)slot, block, (int64_t)size, stamp, pc);
  }
  LeakboundJobClockCheck();
}

/* Without call sites (the core's general entry records as if no hold were on). */
static __attribute__((noinline)) void CountedSiteless(void* block, uint64_t size) {
  LeakboundHeapOnAlloc(block, size);
  LeakboundJobClockCheck();
}

static inline void Counted(void* block, uint64_t size, uintptr_t pc) {
  if (__builtin_expect(g_leakbound_sites_on, 1)) {
    if (!LeakboundSiteCountedFast(block, size, pc, 0)) CountedAtSite(block, size, pc);
  } else {
    unsigned stamp;
    int slot;
    if (!LeakboundHeapOnAllocFast(block, size, 0, &stamp, &slot)) CountedSiteless(block, size);
  }
}

/* The general allocation path of malloc and operator new, which reach it by tail calls
 * (LeakboundSiteMalloc's declaration): returns the block. */
__attribute__((noinline)) void* LeakboundAllocGeneral(void* block, uint64_t size, uintptr_t pc) {
  if (__builtin_expect(g_leakbound_sites_on, 1)) {
    CountedAtSite(block, size, pc);
  } else {
    CountedSiteless(block, size);
  }
  return block;
}

__attribute__((noinline)) void* LeakboundJobClockSampleReturning(void* block) {
  LeakboundJobClockSample();
  return block;
}

/* The general path without call sites (a block allocated while they are being switched on gets
 * none, as one on the common path just before). */
static __attribute__((noinline)) void* SitelessAllocGeneral(void* block, uint64_t size) {
  CountedSiteless(block, size);
  return block;
}

/* The same without call sites: the core's common path, else, while the job's clock holds the
 * fast paths (a process that marks no step yet: a PyTorch program's whole import), the same
 * path past the hold and the clock's test; else the general one. pc is not read: no register
 * keeps it. */
static inline __attribute__((always_inline)) void* SitelessCounted(void* block, uint64_t size) {
  unsigned stamp;
  int slot;
  if (__builtin_expect(LeakboundHeapOnAllocFast(block, size, 0, &stamp, &slot), 1)) return block;
  if (LeakboundHeapOnAllocFastInHold(block, size, 0, &stamp, &slot)) {
    return LeakboundJobClockMoved() ? LeakboundJobClockSampleReturning(block) : block;
  }
  return SitelessAllocGeneral(block, size);
}

static __attribute__((noinline, cold)) void* RealNew(const char* name, size_t size);

void* LeakboundNewFailed(size_t bytes) { return RealNew("_Znwm", bytes); }

/* operator new(size_t)'s whole path without call sites (it jumps to it). */
static __attribute__((noinline)) LB_HOOK_FRAMELESS void* SitelessNew(size_t size) {
  const size_t bytes = size + (size == 0);
  void* block = __libc_malloc(bytes);
  if (__builtin_expect(block == NULL, 0)) return LeakboundNewFailed(bytes);
  return SitelessCounted(block, bytes);
}

/* malloc's whole path without call sites (malloc jumps to it). */
static __attribute__((noinline)) LB_HOOK_FRAMELESS void* SitelessMalloc(size_t size) {
  void* block = __libc_malloc(size);
  if (__builtin_expect(block == NULL, 0)) return NULL;
  return SitelessCounted(block, size);
}

static inline void Forgotten(void* block, LeakboundHeapTaken taken) {
  if (!taken.found) return;
  const uint32_t slot = LeakboundHeapForgetTaken(taken);
  if (taken.site) LeakboundSiteFree(taken.site, slot, block, (int64_t)taken.size, taken.epoch);
}

static __attribute__((noinline)) void UncountedAtSite(void* block) {
  LeakboundHeapTaken taken = LeakboundHeapOnFreeTaken(block);
  if (taken.found && taken.site) {
    LeakboundSiteFree(taken.site, taken.slot, block, (int64_t)taken.size, taken.epoch);
  }
}

/* A block's record and books, before a free that is not glibc's (pymalloc's, under its hooks). */
static inline void Uncounted(void* block) {
  if (__builtin_expect(g_leakbound_sites_on, 1)) {
    if (!LeakboundSiteUncountedFast(block)) UncountedAtSite(block);
  } else {
    LeakboundHeapOnFreeSiteless(block); /* no record holds a site while they are off */
  }
}

/* The free hooks: the common path (the core's and the site's books, all or nothing) calls
 * nothing but glibc's free, as a tail call, so it keeps no frame and saves no register; anything
 * else goes the general way, out of line, which ends with the real free too. */
__attribute__((noinline)) void LeakboundFreeGeneral(void* block) {
  if (__builtin_expect(g_leakbound_sites_on, 1)) {
    UncountedAtSite(block);
  } else {
    LeakboundHeapOnFreeSiteless(block); /* no record holds a site while they are off */
  }
  __libc_free(block);
}

/* Without call sites: the core's common path, then glibc's free, else the general path; one copy
 * out of line that every free hook jumps to (inlined into each, the core's path was not). */
static __attribute__((noinline, flatten)) LB_HOOK_FRAMELESS void SitelessFreeBlock(void* block) {
  if (__builtin_expect(LeakboundHeapOnFreeFastSiteless(block), 1)) {
    __libc_free(block);
  } else {
    LeakboundFreeGeneral(block);
  }
}

/* The paths the hooks jump to: without call sites until the marker switches them on
 * (LeakboundSitesStart, one way), then with them; one indirect jump in each hook where a load,
 * a test and a jump chose them. Initialised statically: the library's relocations are applied
 * before anything in the process can call its malloc (ld.so moves to the process's malloc only
 * once every object is relocated). malloc's and operator new's are their whole paths, glibc's
 * malloc and the counting in one function, which the hook jumps to (the return address is its
 * caller's); free's books the block, then calls glibc's free. */
typedef void (*FreePath)(void* block);
typedef void* (*MallocPath)(size_t size);
static _Atomic(MallocPath) g_malloc_path = SitelessMalloc;
static _Atomic(MallocPath) g_new_path = SitelessNew; /* operator new(size_t)'s, the same way */
static _Atomic(FreePath) g_free_path = SitelessFreeBlock;

void LeakboundHooksSitesOn(void) {
  /* Release: a thread that sees a later store sees the ones before it (x86-64: plain stores and
   * loads either way). A block with a site is made only after one of the later three is seen, and
   * reaches a free through the program's own hand-over, which orders the free path's load. */
  atomic_store_explicit(&g_free_path, LeakboundSiteFreeBlock, memory_order_release);
  __atomic_store_n(&g_leakbound_sites_on, 1, __ATOMIC_RELEASE);
  atomic_store_explicit(&g_malloc_path, LeakboundSiteMalloc, memory_order_release);
  atomic_store_explicit(&g_new_path, LeakboundSiteNew, memory_order_release);
}

static inline void FreeBlock(void* block) {
  /* Relaxed: the free of a block with a site follows its allocation, whose acquire load saw the
   * allocation path's release store, which the free path's store precedes. */
  atomic_load_explicit(&g_free_path, memory_order_relaxed)(block);
}

#define PC() ((uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0)))

static void* MallocAt(size_t size, uintptr_t pc) {
  void* block = __libc_malloc(size);
  if (block) Counted(block, size, pc);
  return block;
}

static void* ReallocAt(void* block, size_t size, uintptr_t pc) {
  if (!block) return MallocAt(size, pc);
  LeakboundHeapTaken taken = LeakboundHeapTake(block);
  void* moved = __libc_realloc(block, size);
  if (!moved && size != 0) {
    LeakboundHeapPutBack(block, taken);
    return NULL;
  }
  Forgotten(block, taken);
  if (moved) Counted(moved, size, pc);
  return moved;
}

static void* MemalignAt(size_t alignment, size_t size, uintptr_t pc) {
  void* block = __libc_memalign(alignment, size);
  if (block) Counted(block, size, pc);
  return block;
}

/* malloc and operator new are one jump each to their whole paths (g_malloc_path, g_new_path),
 * which read the return address after the real malloc (from the stack, where it stays, so that no
 * register holds it across the call) and keep no frame pointer: their general path, reached by a
 * tail call, keeps one right below the return address (LeakboundSiteMalloc's declaration). */
LB_EXPORT LB_HOOK_FRAMELESS void* malloc(size_t size) {
  return atomic_load_explicit(&g_malloc_path, memory_order_acquire)(size);
}

LB_EXPORT __attribute__((flatten)) LB_HOOK_FRAMELESS void free(void* block) {
  if (block) FreeBlock(block);
}

LB_EXPORT __attribute__((flatten)) void* calloc(size_t count, size_t size) {
  void* block = __libc_calloc(count, size);
  if (block) Counted(block, (uint64_t)count * size, PC());
  return block;
}

LB_EXPORT __attribute__((flatten)) void* realloc(void* block, size_t size) {
  return ReallocAt(block, size, PC());
}

LB_EXPORT void* reallocarray(void* block, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  return ReallocAt(block, bytes, PC());
}

LB_EXPORT void* memalign(size_t alignment, size_t size) {
  return MemalignAt(alignment, size, PC());
}

LB_EXPORT void* aligned_alloc(size_t alignment, size_t size) {
  return MemalignAt(alignment, size, PC());
}

LB_EXPORT int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) {
    return EINVAL;
  }
  void* block = __libc_memalign(alignment, size);
  if (!block) return ENOMEM;
  Counted(block, size, PC());
  *out = block;
  return 0;
}

LB_EXPORT void* valloc(size_t size) {
  void* block = __libc_valloc(size);
  if (block) Counted(block, size, PC());
  return block;
}

LB_EXPORT void* pvalloc(size_t size) {
  size_t page = (size_t)getpagesize();
  void* block = __libc_pvalloc(size);
  if (block) Counted(block, (size + page - 1) & ~(page - 1), PC());
  return block;
}

/* C++ operator new/delete: defined here so that the call site is the caller of new, not
 * libstdc++'s operator new. On failure, the real operator new (new-handler, bad_alloc) is
 * called; it is found with dlsym only then.
 *
 * The array and sized forms do what libstdc++'s do: forward to the plain operator new(size_t)
 * and operator delete(void*) that the process resolves. A program may replace only those two
 * (the standard allows it, a tracking header is a common pattern) and then expects new[], the
 * sized deletes and delete[] to reach its own: the preload's used to call free() directly on the
 * program's pointer ("free(): invalid pointer"). InitPreloadFrontEnd resolves the two; while they
 * are the preload's own (the usual case, and before the constructor runs) the forms call the
 * shared helpers directly, so that the call site stays the caller of new[]. */
typedef void* (*NewFn)(size_t);
typedef void (*DeleteFn)(void*);
static NewFn g_program_new;       /* the program's operator new(size_t), or NULL: ours */
static DeleteFn g_program_delete; /* the program's operator delete(void*), or NULL: ours */
static _Atomic int g_operators_resolved;
/* Set while the program's operator delete runs: in a non-PIE executable that takes the address
 * of operator delete, the symbol resolves to the executable's PLT stub, which leads back here. */
static __thread int t_in_program_delete;

static __attribute__((noinline, cold)) void ResolveProgramOperators(void);

static void* RealNew(const char* name, size_t size) {
  NewFn real = (NewFn)dlsym(RTLD_NEXT, name);
  return real ? real(size) : NULL;
}
static void* NewAt(const char* name, size_t size, uintptr_t pc) {
  void* block = MallocAt(size ? size : 1, pc);
  return block ? block : RealNew(name, size);
}
/* Set once the operators are resolved and operator delete(void*) is ours (the usual case): the
 * delete hooks then free as free does, with no test of their own but this one. */
static _Atomic int g_delete_is_ours;
static __attribute__((noinline)) void DeleteResolving(void* block) {
  if (!atomic_load_explicit(&g_operators_resolved, memory_order_acquire)) ResolveProgramOperators();
  DeleteFn program = g_program_delete;
  if (program && !t_in_program_delete) {
    t_in_program_delete = 1;
    program(block);
    t_in_program_delete = 0;
  } else if (block) {
    FreeBlock(block);
  }
}
static inline void DeleteOf(void* block) {
  if (__builtin_expect(atomic_load_explicit(&g_delete_is_ours, memory_order_relaxed), 1)) {
    if (block) FreeBlock(block);
  } else {
    DeleteResolving(block);
  }
}
/* As malloc, one jump to its whole path (SitelessNew, LeakboundSiteNew); the size a block of 0
 * bytes is counted with, 1, is what the real operator new is asked for when glibc has none
 * (new(0) and new(1) both return a unique block). */
LB_EXPORT LB_HOOK_FRAMELESS void* _Znwm(size_t size) {
  return atomic_load_explicit(&g_new_path, memory_order_acquire)(size);
}
LB_EXPORT void* _Znam(size_t size) {
  if (!atomic_load_explicit(&g_operators_resolved, memory_order_acquire)) ResolveProgramOperators();
  NewFn program = g_program_new;
  return program ? program(size) : NewAt("_Znam", size, PC());
}
LB_EXPORT __attribute__((flatten)) LB_HOOK_FRAMELESS void _ZdlPv(void* block) { DeleteOf(block); }
LB_EXPORT __attribute__((flatten)) LB_HOOK_FRAMELESS void _ZdaPv(void* block) { DeleteOf(block); }
LB_EXPORT __attribute__((flatten)) LB_HOOK_FRAMELESS void _ZdlPvm(void* block, size_t size) {
  (void)size;
  DeleteOf(block);
}
LB_EXPORT __attribute__((flatten)) LB_HOOK_FRAMELESS void _ZdaPvm(void* block, size_t size) {
  (void)size;
  DeleteOf(block);
}

/* The process's operator new(size_t) / delete(void*) when another module (the program)
 * defines them before this library in the search order; NULL when they are ours. */
static void* ProgramsOwn(const char* name) {
  void* resolved = dlsym(RTLD_DEFAULT, name);
  Dl_info where, self;
  if (!resolved || !dladdr(resolved, &where) || !dladdr((void*)&NewAt, &self)) return NULL;
  return where.dli_fbase == self.dli_fbase ? NULL : resolved;
}

/* On first use (a C++ library's static initialisers run before this library's constructor) and
 * in the constructor; resolving twice gives the same answer. */
static __attribute__((noinline, cold)) void ResolveProgramOperators(void) {
  g_program_new = (NewFn)ProgramsOwn("_Znwm");
  g_program_delete = (DeleteFn)ProgramsOwn("_ZdlPv");
  atomic_store_explicit(&g_operators_resolved, 1, memory_order_release);
  atomic_store_explicit(&g_delete_is_ours, g_program_delete == NULL, memory_order_relaxed);
}

/* ---- anonymous mappings ----------------------------------------------------------------- */
/* A small table of the anonymous mappings made through mmap (glibc's own malloc mmaps go
 * through its internal __mmap and are counted as heap, not here). munmap/mremap scan it (they
 * are rare and cost a syscall anyway) and subtract the overlap; a hole punched in the middle of
 * a mapping splits it. A mapping that finds no slot is not counted (mapped_dropped). One spin
 * lock covers each change, so a remove never reads a slot half-written by an insert, and two
 * threads unmapping one range take it off once (watch.maps_clean); a mapping made from a signal
 * handler that interrupted this thread inside the table is not counted, nor is an unmapping
 * there (both mapped_dropped), and a forked child starts with the lock free. */
enum { kMaps = 4096 };
typedef struct Mapping {
  _Atomic uintptr_t start; /* 0: free */
  _Atomic uintptr_t length;
  uint32_t site;  /* its call site (0: none), written before start under the lock */
  unsigned stamp; /* the census stamp of its birth (LeakboundHeapEpochNow) */
} Mapping;
static Mapping g_maps[kMaps];
/* Slots [0, g_maps_end) have held a mapping (under the lock): what munmap and mremap scan. The
 * whole table was 4,096 slots a scan: 8.5 M instructions in the 200-step PyTorch MLP (callgrind),
 * 3% of the preload's. */
static int g_maps_end;
static _Atomic uint64_t g_mapped_bytes;
static _Atomic uint64_t g_mapped_dropped;
static atomic_flag g_maps_lock = ATOMIC_FLAG_INIT;
static __thread int t_maps_held;

uint64_t LeakboundMappedDropped(void) { return atomic_load(&g_mapped_dropped); }

/* t_maps_held is set before the lock is taken and cleared after it is let go, so a signal
 * handler that interrupts this thread anywhere in between sees it and does not spin on a lock
 * its own thread holds. */
static int MapsLock(void) {
  if (t_maps_held) return 0; /* a signal handler on this thread, inside the table */
  t_maps_held = 1;
  atomic_signal_fence(memory_order_seq_cst);
  while (atomic_flag_test_and_set_explicit(&g_maps_lock, memory_order_acquire)) sched_yield();
  return 1;
}
static void MapsUnlock(void) {
  atomic_flag_clear_explicit(&g_maps_lock, memory_order_release);
  atomic_signal_fence(memory_order_seq_cst);
  t_maps_held = 0;
}
static void MapsAfterForkInChild(void) {
  t_maps_held = 0;
  atomic_flag_clear_explicit(&g_maps_lock, memory_order_relaxed);
}

static uintptr_t PageRound(size_t length) {
  uintptr_t page = (uintptr_t)getpagesize();
  return ((uintptr_t)length + page - 1) & ~(page - 1);
}

/* Books a mapping (or the tail a hole split off one: `split`, its bytes already booked to the
 * site) with its call site and birth stamp. */
static void MapInsertLocked(uintptr_t start, uintptr_t length, uint32_t site, unsigned stamp,
                            int split) {
  if (length == 0) return;
  for (int i = 0; i < kMaps; ++i) {
    if (atomic_load_explicit(&g_maps[i].start, memory_order_relaxed) == 0) {
      if (i >= g_maps_end) g_maps_end = i + 1;
      g_maps[i].site = site;
      g_maps[i].stamp = stamp;
      atomic_store(&g_maps[i].length, length);
      atomic_store(&g_maps[i].start, start);
      atomic_fetch_add(&g_mapped_bytes, length);
      LeakboundSiteMapped(site, start, split ? 0 : (int64_t)length, 1, stamp,
                          LEAKBOUND_WATCH_SITE_MAPPING);
      return;
    }
  }
  atomic_fetch_add(&g_mapped_dropped, 1);
}

/* Removes [start, start + length) from the books; returns 1 if it overlapped a mapping, and
 * the call site and stamp of the first it overlapped in *site / *stamp (when not NULL). */
static int MapRemoveLocked(uintptr_t start, uintptr_t length, uint32_t* site, unsigned* stamp) {
  uintptr_t end = start + length;
  int overlapped = 0;
  for (int i = 0; i < g_maps_end; ++i) {
    uintptr_t s = atomic_load_explicit(&g_maps[i].start, memory_order_relaxed);
    if (s == 0) continue;
    uintptr_t e = s + atomic_load_explicit(&g_maps[i].length, memory_order_relaxed);
    if (e <= start || s >= end) continue;
    const uint32_t its_site = g_maps[i].site;
    const unsigned its_stamp = g_maps[i].stamp;
    if (!overlapped && site) *site = its_site;
    if (!overlapped && stamp) *stamp = its_stamp;
    overlapped = 1;
    uintptr_t cut_start = s > start ? s : start;
    uintptr_t cut_end = e < end ? e : end;
    atomic_fetch_sub(&g_mapped_bytes, cut_end - cut_start);
    const int whole = cut_start == s && cut_end == e;
    LeakboundSiteMapped(its_site, s, -(int64_t)(cut_end - cut_start), whole ? -1 : 0, its_stamp,
                        LEAKBOUND_WATCH_SITE_MAPPING);
    if (whole) {
      atomic_store(&g_maps[i].start, 0);
    } else if (cut_start == s) {
      atomic_store(&g_maps[i].length, e - cut_end);
      atomic_store(&g_maps[i].start, cut_end);
    } else {
      atomic_store(&g_maps[i].length, cut_start - s);
      if (cut_end < e) { /* a hole: the tail becomes its own mapping, of the same site */
        atomic_fetch_sub(&g_mapped_bytes, e - cut_end);
        MapInsertLocked(cut_end, e - cut_end, its_site, its_stamp, 1);
      }
    }
  }
  return overlapped;
}

static void MapInsert(uintptr_t start, uintptr_t length, uint32_t site, unsigned stamp) {
  if (!MapsLock()) {
    atomic_fetch_add(&g_mapped_dropped, 1);
    return;
  }
  MapInsertLocked(start, length, site, stamp, 0);
  MapsUnlock();
}

static int MapRemove(uintptr_t start, uintptr_t length, uint32_t* site, unsigned* stamp) {
  if (!MapsLock()) { /* a signal handler inside the table: the unmapping is not booked */
    atomic_fetch_add(&g_mapped_dropped, 1);
    return 0;
  }
  int overlapped = MapRemoveLocked(start, length, site, stamp);
  MapsUnlock();
  return overlapped;
}

/* A new mapping's call site (pc: the caller of mmap), with call sites on. */
static uint32_t MapSite(uintptr_t pc) {
  return g_leakbound_sites_on && !leakbound_heap_excluded() ? LeakboundSiteFor(pc) : 0;
}

/* Set while pymalloc maps or unmaps an arena (below): its objects are counted one by one in the
 * heap, so its arenas are not the program's own mappings. */
static __thread int t_arena_maps;

static void* MmapAt(void* address, size_t length, int prot, int flags, int fd, off_t offset,
                    uintptr_t pc) {
  long mapped = syscall(SYS_mmap, address, length, prot, flags, fd, offset);
  if (mapped == -1) return MAP_FAILED;
  if (t_arena_maps) return (void*)mapped;
  if (flags & MAP_FIXED) MapRemove((uintptr_t)mapped, PageRound(length), NULL, NULL);
  if (flags & MAP_ANONYMOUS) {
    MapInsert((uintptr_t)mapped, PageRound(length), MapSite(pc), LeakboundHeapEpochNow());
  }
  return (void*)mapped;
}

LB_EXPORT void* mmap(void* address, size_t length, int prot, int flags, int fd, off_t offset) {
  return MmapAt(address, length, prot, flags, fd, offset, PC());
}

LB_EXPORT void* mmap64(void* address, size_t length, int prot, int flags, int fd, off_t offset) {
  return MmapAt(address, length, prot, flags, fd, offset, PC());
}

LB_EXPORT int munmap(void* address, size_t length) {
  long result = syscall(SYS_munmap, address, length);
  if (result == 0 && !t_arena_maps) MapRemove((uintptr_t)address, PageRound(length), NULL, NULL);
  return (int)result;
}

LB_EXPORT void* mremap(void* old_address, size_t old_length, size_t new_length, int flags, ...) {
  void* new_address = NULL;
  if (flags & MREMAP_FIXED) {
    __builtin_va_list args;
    __builtin_va_start(args, flags);
    new_address = __builtin_va_arg(args, void*);
    __builtin_va_end(args);
  }
  long moved = syscall(SYS_mremap, old_address, old_length, new_length, flags, new_address);
  if (moved == -1) return MAP_FAILED;
  uint32_t site = 0;
  unsigned stamp = 0;
  if (MapRemove((uintptr_t)old_address, PageRound(old_length), &site, &stamp)) {
    MapInsert((uintptr_t)moved, PageRound(new_length), site, stamp); /* its site and birth */
  }
  return (void*)moved;
}

uint64_t LeakboundMappedBytes(void) { return atomic_load(&g_mapped_bytes); }

/* The hooks receive the process's allocations only if this library precedes libc in the symbol
 * search order (LD_PRELOAD puts it first). Checked by effect, not by address: in a non-PIE
 * executable that takes malloc's address (Debian's python3), &malloc is the executable's
 * canonical PLT stub, which forwards here, so comparing addresses would wrongly say "not ours". */
__attribute__((constructor(102))) static void InitPreloadFrontEnd(void) {
  /* The core's own allocation table (mmap'd in its constructor) is not the program's. Only the
   * slots that held a mapping are cleared: the others are still the zeroed bss, and writing all
   * 4,096 was 24 page faults in every watched process's start. */
  for (int i = 0; i < g_maps_end; ++i) atomic_store(&g_maps[i].start, 0);
  g_maps_end = 0;
  atomic_store(&g_mapped_bytes, 0);
  pthread_atfork(NULL, NULL, MapsAfterForkInChild);
  void* (*volatile process_malloc)(size_t) = &malloc;
  void (*volatile process_free)(void*) = &free;
  void* probe = process_malloc(24);
  LeakboundHeapTaken taken = LeakboundHeapTake(probe);
  int ours = taken.found;
  LeakboundHeapPutBack(probe, taken);
  process_free(probe);
  if (ours) {
    LeakboundHeapSetFrontEnd("preload", NULL);
  } else {
    LeakboundHeapSetFrontEnd("preload",
                             "unavailable: another malloc precedes libleakbound_preload in the "
                             "symbol search order (load it with LD_PRELOAD)");
  }
  ResolveProgramOperators();
}

/* ---- Python's object allocator ----------------------------------------------------------- */

/* CPython's PyMemAllocatorEx and PyObjectArenaAllocator (stable since 3.4/3.5), declared here
 * so that the preload needs no Python headers; the functions are found with dlsym in the
 * process (python3 exports them). */
typedef struct PyAllocator {
  void* ctx;
  void* (*malloc)(void* ctx, size_t size);
  void* (*calloc)(void* ctx, size_t count, size_t size);
  void* (*realloc)(void* ctx, void* block, size_t size);
  void (*free)(void* ctx, void* block);
} PyAllocator;
typedef struct PyArenaAllocator {
  void* ctx;
  void* (*alloc)(void* ctx, size_t size);
  void (*free)(void* ctx, void* block, size_t size);
} PyArenaAllocator;
enum { kPyDomainMem = 1, kPyDomainObject = 2 }; /* PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ */

/* pymalloc, as it was before the hook, for PyMem_Malloc and PyObject_Malloc (both pymalloc
 * since 3.6); the hooks' ctx points at their domain's. */
static PyAllocator g_py_domains[2];
static PyArenaAllocator g_py_arenas;

/* pymalloc's smallest size class (16 bytes) puts two live objects 16 bytes apart, inside one
 * 32-byte granule of the record table: requests of up to 16 bytes are served from the 32-byte
 * class (the counters still count what was asked). */
static inline size_t PyRequest(size_t size) { return size > 16 ? size : 17; }

/* The previous allocator runs excluded: pymalloc hands blocks over 512 bytes to malloc, which
 * must not count them a second time. */
static void* PyHookMalloc(void* ctx, size_t size) {
  const PyAllocator* prev = (const PyAllocator*)ctx;
  leakbound_heap_exclude_begin();
  void* block = prev->malloc(prev->ctx, PyRequest(size));
  leakbound_heap_exclude_end();
  if (block) Counted(block, size, PC());
  return block;
}

static void* PyHookCalloc(void* ctx, size_t count, size_t size) {
  const PyAllocator* prev = (const PyAllocator*)ctx;
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) return NULL;
  leakbound_heap_exclude_begin();
  void* block = prev->calloc(prev->ctx, 1, PyRequest(bytes));
  leakbound_heap_exclude_end();
  if (block) Counted(block, bytes, PC());
  return block;
}

static void* PyHookRealloc(void* ctx, void* block, size_t size) {
  const PyAllocator* prev = (const PyAllocator*)ctx;
  if (!block) return PyHookMalloc(ctx, size);
  LeakboundHeapTaken taken = LeakboundHeapTake(block);
  leakbound_heap_exclude_begin();
  void* moved = prev->realloc(prev->ctx, block, PyRequest(size));
  leakbound_heap_exclude_end();
  if (!moved) {
    LeakboundHeapPutBack(block, taken);
    return NULL;
  }
  Forgotten(block, taken);
  Counted(moved, size, PC());
  return moved;
}

static void PyHookFree(void* ctx, void* block) {
  const PyAllocator* prev = (const PyAllocator*)ctx;
  if (!block) return;
  Uncounted(block);
  prev->free(prev->ctx, block);
}

static void* PyArenaAlloc(void* ctx, size_t size) {
  (void)ctx;
  ++t_arena_maps;
  void* arena = g_py_arenas.alloc(g_py_arenas.ctx, size);
  --t_arena_maps;
  return arena;
}

static void PyArenaFree(void* ctx, void* arena, size_t size) {
  (void)ctx;
  ++t_arena_maps;
  g_py_arenas.free(g_py_arenas.ctx, arena, size);
  --t_arena_maps;
}

/* Called by the leakbound module at its import, with the GIL held, when Python's object
 * allocator is pymalloc (no PYTHONMALLOC=malloc): from then on every Python object and every
 * PyMem_Malloc buffer is counted in the heap like a malloc'd block, at pymalloc's speed; objects made before are not (as blocks
 * allocated before the preload loaded), and their frees find no record. Returns 1 once hooked
 * (this call or an earlier one), 0 when the process has no such functions. */
LB_EXPORT int leakbound_python_hook_objects(void) {
  static int hooked;
  if (hooked) return 1;
  void (*get_objects)(int, PyAllocator*) =
      (void (*)(int, PyAllocator*))dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
  void (*set_objects)(int, PyAllocator*) =
      (void (*)(int, PyAllocator*))dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
  void (*get_arenas)(PyArenaAllocator*) =
      (void (*)(PyArenaAllocator*))dlsym(RTLD_DEFAULT, "PyObject_GetArenaAllocator");
  void (*set_arenas)(PyArenaAllocator*) =
      (void (*)(PyArenaAllocator*))dlsym(RTLD_DEFAULT, "PyObject_SetArenaAllocator");
  if (!get_objects || !set_objects || !get_arenas || !set_arenas) return 0;
  static PyAllocator hooks[2];
  static PyArenaAllocator arenas = {NULL, PyArenaAlloc, PyArenaFree};
  get_arenas(&g_py_arenas);
  set_arenas(&arenas);
  const int domains[2] = {kPyDomainMem, kPyDomainObject};
  for (int d = 0; d < 2; ++d) {
    get_objects(domains[d], &g_py_domains[d]);
    hooks[d] = (PyAllocator){&g_py_domains[d], PyHookMalloc, PyHookCalloc, PyHookRealloc,
                             PyHookFree};
    set_objects(domains[d], &hooks[d]);
  }
  hooked = 1;
  return 1;
}
