/* The hook core of the exact host-heap interposer: per-allocation records and per-thread counters.
 * The front ends (interpose_glibc.c, interpose_sanitizer.c, the `watch` preload) call the
 * LeakboundHeapOn* functions from inside malloc/free; nothing here allocates, locks or blocks, and
 * the fast path has no lock-prefixed instruction.
 *
 * Records: a direct-mapped table keyed by the block's address, in two levels: the address space is
 * cut into 128 MiB regions, each with a directory (4 KiB) of 512 chunks of 256 KiB of address. A
 * chunk holds one record per granule of 32 bytes (glibc: distinct live blocks are >= MINSIZE = 32
 * bytes apart) or 16 bytes (sanitizer allocators: LEAKBOUND_HEAP_GRANULE_SHIFT=4): a 32-bit word
 * in one array and a 16-bit call site in another (written only when a site is stored, so a run
 * without call sites never touches its pages). A directory and a chunk are mmap'd (MAP_NORESERVE,
 * raw syscall so that no interposed mmap sees it) when the first block of their stretch is
 * recorded; when the kernel refuses, the block goes untracked and the heap says it is degraded.
 * Two live blocks never share a record: the record of a live block belongs to whoever holds the
 * block, so malloc writes it and free clears it with plain stores, ordered by the allocator's own
 * hand-over of the address (free before the next malloc that returns it). A record still set when
 * malloc returns its granule again is stale (that block's free bypassed the hooks): its bytes are
 * dropped from the books. Chosen over a header in front of each block because the user pointer
 * stays the allocator's own (malloc_usable_size, memalign and realloc need no translation), a
 * pointer never recorded (allocated before the library loaded, by ld.so, or while excluded) is
 * simply not found, and the sanitizer mode can use it too. The price: committed pages of an eighth
 * of the span of the small-block heap (3/16 with call sites), and address space of 3/16 of the
 * span of each 256 KiB stretch that holds a block. The word: valid, the block's offset in its
 * granule (the granule itself is the record's place), its size (13 bits; a block of 8,176 bytes or
 * more keeps its size in a large-block table, which the size field names) and its birth stamp;
 * the site is `leakbound watch`'s call-site id (16 bits, 0 unless the front end passes one). Until
 * 2026-12-06 a record was one 8-byte word (24-bit site, 21-bit size): 24 MiB of a PyTorch run's
 * resident memory where the six bytes take 12 (no call sites) or 18.
 *
 * Counters: every figure sits in a per-thread slot written only by its owner (relaxed load + store,
 * no lock prefix) and summed by leakbound_heap_read, so live bytes and allocations are exact
 * whenever the threads are quiet. A slot's live bytes are its thread's allocations minus its frees
 * (negative when it frees others' blocks). A slot keeps its values when its thread exits and is
 * reused by the next thread; when all slots are taken, threads share slot 0 with atomic
 * read-modify-writes. The peak is per slot too: each slot keeps the high-water mark of its own live
 * bytes since the last reset, and peak_bytes is their sum, an upper bound of the process-wide
 * high-water mark that equals it when one thread moves the heap between resets.
 *
 * The census of survivors by birth (docs/heap.md, "Census"): the recorder (the Runner at block
 * ends, the watch preload at its census points) cuts time into cohorts. A record carries the 16-bit
 * stamp of its block's birth, so a census costs no byte of record. Every slot keeps, per cohort,
 * the bytes and blocks its thread allocated into it (booked with the cohort of the same clock read
 * that stamps the record) and the bytes and blocks born in it that its thread freed (the owner's
 * plain stores again). A census is the difference, summed over the slots: O(slots x cohorts), no
 * walk over the records. A cohort's births were once the rise of the slots' totals over its
 * stretch, read when it began: an allocation that read the clock before a switch and counted
 * itself after that read was born in one cohort and freed from the other, a survivor that never
 * was (a clean 4-thread loop under --interval was judged growing). The stamp is the census
 * generation and the cohort; leakbound_heap_census_start() begins a new generation, and a block of
 * an earlier one goes to the "older" cohort when it is freed, so what the cohorts hold when the
 * census starts stays put and is subtracted (g_born_origin, g_census_origin). Cohorts past the last
 * (kCohorts - 2) share it. A block 256 censuses old is taken for one of the current census. */
#define _GNU_SOURCE 1
#include "heap_core.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "leakbound/watch/heap.h"

#define LB_TLS __thread __attribute__((tls_model("initial-exec")))
#define LB_LIKELY(x) __builtin_expect(!!(x), 1)
#define LB_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Whether the counters keep total_bytes (leakbound_heap_stats): the watch preload, whose samples
 * carry no such figure, compiles the core with 0 and its allocations skip that add, one of the
 * common path's seven stores (leakbound_heap_read then says 0). */
#ifndef LEAKBOUND_HEAP_TOTAL_BYTES
#define LEAKBOUND_HEAP_TOTAL_BYTES 1
#endif

#ifndef LEAKBOUND_HEAP_GRANULE_SHIFT
#define LEAKBOUND_HEAP_GRANULE_SHIFT 5 /* glibc's MINSIZE on 64-bit */
#endif

enum {
  kGranuleShift = LEAKBOUND_HEAP_GRANULE_SHIFT,
  kRegionBits = 27,         /* 128 MiB of address space per region (a directory) */
  kChunkBits = 18,          /* 256 KiB of address space per chunk of records */
  kAddressBits = 47,        /* user space without 5-level paging hints */
  kThreadSlots = LEAKBOUND_HEAP_SLOTS, /* per-thread counter slots; slot 0 is shared */
  /* A record is six bytes in two arrays of its chunk: a 32-bit word, valid (bit 0), the block's
   * offset in its granule in 8-byte units (bits 1..2), birth stamp (3..18), size (19..31); and
   * the call site, 16 bits, in an array of its own, written only when a site is stored (so a
   * run without call sites never touches its pages). The stamp's place is the census clock's
   * (g_census_clock), so an allocation ors the clock's low half into the word and finds its
   * book in the same bits; the size on top comes out of the word with one shift. */
  kOffsetShift = 1,
  kStampShift = 3,
  kSizeShift = 19,
  kSizeBits = 13,
  kSiteMax = (1 << 16) - 1,            /* the largest call-site id a record holds */
  kLargeTables = 16,                   /* large-block tables, each twice the one before */
  kLargeField = (1 << kSizeBits) - kLargeTables, /* size field kLargeField + t: in large table t */
  kLargeFirstSlots = 1 << 12,          /* the first table's slots (64 KiB) */
  kCohorts = LEAKBOUND_HEAP_COHORTS + 1, /* + one for blocks born before the census started */
  kOlderCohort = LEAKBOUND_HEAP_COHORTS,
  kBooks = 2 * kCohorts, /* a set of cohorts per generation parity */
};
static const uint32_t kEmpty = 0;
static const uint64_t kInlineSizeMax = kLargeField - 1; /* 8,175: larger sizes go to a large table */
/* Blocks below this size come from a heap that fills densely (glibc serves 128 KiB and more from
 * mappings of their own until its mmap threshold rises): MapChunk. */
static const uint64_t kDenseBlockMax = (uint64_t)64 << 10;
static const uintptr_t kLargeTombstone = 1;
static const size_t kChunksPerRegion = (size_t)1 << (kRegionBits - kChunkBits);
static const uintptr_t kGranuleMask = ((uintptr_t)1 << kGranuleShift) - 1;

/* The records of 256 KiB of address: one per granule, its word and its call site. */
typedef struct Chunk {
  _Atomic uint32_t word[(size_t)1 << (kChunkBits - kGranuleShift)]; /* kEmpty, or the fields */
  _Atomic uint16_t site[(size_t)1 << (kChunkBits - kGranuleShift)]; /* 0 unless word holds one */
} Chunk;

/* The sizes of live blocks too large for a record's 13 bits (>= 8,176 bytes: a block that large
 * is written by its owner, beside which a probe is little; a PyTorch training run holds ~200 at
 * once). Tables of 4,096, 8,192, ... slots, mapped when the ones before are half full; the
 * record says which table holds its block. Open addressing, linear probing; a freed entry
 * becomes a tombstone, which the next insert on its path takes (slots never become empty again,
 * so a probe for a live key stops at it or at an empty slot). */
typedef struct LargeEntry {
  _Atomic uintptr_t key; /* 0 empty, kLargeTombstone, else the block's address */
  _Atomic uint64_t size;
} LargeEntry;

/* A book's four figures side by side, 32 bytes: a hook's two adds share a cache line. Until
 * 2026-12-07 they were four arrays of kBooks, so that born_bytes[b] and born_blocks[b] (and the
 * freed pair) lay exactly 4 KiB apart: the second add's load matched the first add's store in its
 * low 12 bits and waited for it (4K aliasing; `perf annotate` of the malloc loop put 26% of the
 * allocation hook's samples and 40% of the free hook's on those two adds). */
typedef struct BookCounts {
  _Atomic int64_t born_bytes;
  _Atomic int64_t born_blocks;
  _Atomic int64_t freed_bytes;
  _Atomic int64_t freed_blocks;
} BookCounts;

typedef struct ThreadCounters {
  _Atomic int owned; /* claimed by a live thread (slot 0, the shared one, is never claimed) */
  uint32_t slot1;    /* 1 + this slot's index, written when claimed: what the hooks return */
  _Atomic int64_t live_bytes;  /* this slot's allocations minus its frees, in bytes */
  _Atomic int64_t peak_bytes;  /* high-water mark of live_bytes since the last reset */
  _Atomic int64_t allocations; /* counted allocations made on this slot */
  _Atomic int64_t frees;       /* frees of counted blocks made on this slot */
  _Atomic int64_t total_bytes;
  _Atomic int64_t untracked_allocations;
  /* Per book (Book(): a cohort in the books of its generation's parity): bytes and blocks this
   * slot allocated into it, and those born in it that this slot freed. */
  BookCounts books[kBooks];
} __attribute__((aligned(64))) ThreadCounters;

/* One TLS block, so a hook computes the thread pointer offset once. counters: the thread's slot
 * (the shared one past kThreadSlots - 1 threads), NULL until claimed. own: the same when it is the
 * thread's own, else NULL; counting: own while this thread's allocations are counted, NULL while
 * it is excluded. So each hook's common path tests one pointer; the shared slot, with its locked
 * adds, goes the slow way. */
typedef struct ThreadState {
  ThreadCounters *counting;
  ThreadCounters *own;
  ThreadCounters *counters;
  int exclude_depth;
  uintptr_t chunk_stretch; /* key >> kChunkBits of the chunk below; kNoStretch: none */
  struct Chunk *chunk;     /* the chunk this thread last found (never NULL while chunk_stretch
                            * names one): chunks are never unmapped */
} ThreadState;
/* No key's stretch (keys are below 2^47): chunk_stretch's value while it names no chunk, so that
 * a hit never needs to test the chunk for NULL; kUpdating, while a miss replaces the cache. */
#define kNoStretch UINTPTR_MAX
#define kUpdating (UINTPTR_MAX - 1)

/* A region's directory: one pointer per chunk of records, NULL until a block is recorded in its
 * stretch of address (4 KiB). */
typedef struct Directory {
  _Atomic(Chunk *) chunks[(size_t)1 << (kRegionBits - kChunkBits)];
} Directory;

static _Atomic(Directory *) g_regions[(size_t)1 << (kAddressBits - kRegionBits)]; /* 8 MiB, bss */
static LargeEntry *_Atomic g_large[kLargeTables]; /* mapped on demand */
static _Atomic int64_t g_large_live[kLargeTables];   /* live entries per table */
/* The fast paths' gate, bits 1..2 of the census clock (g_census_clock): zero, or why an
 * allocation takes the general path: kGatePaused (counting switched off,
 * leakbound_heap_set_counting) or kGateHeld (a front end's hold, LeakboundHeapHoldFastPath). The
 * common path reads the clock anyway: one test of the same load. The bits are the record word's
 * offset field, which the common path ors in after the clock's low half: it does so only with
 * the gate's bits clear (OnAllocFast masks the hold when it records past it). */
enum { kGatePaused = 2, kGateHeld = 4, kGateBits = kGatePaused | kGateHeld };
static _Atomic int g_degraded;
/* Set before or at the first record that stores a call site (LeakboundHeapSitesStored, or the
 * general path's StoreSite): from then on OnFree clears a record's site too (a run without call
 * sites never reads the sites' array). OnFreeSiteless does not look: its callers know that no
 * record holds a site. */
static _Atomic int g_sites_stored;
/* Zero-initialised (bss): with an initialiser the 16 MiB of slots were .data in the library's
 * file. Slot 0 is the shared one (IsShared); the claim loop starts at slot 1. */
static ThreadCounters g_threads[kThreadSlots];
static _Atomic int g_threads_used = 1; /* slots [0, used) have been claimed at least once */
/* The census clock: the record word's bits that the current stamp sets (ClockOf: valid, and the
 * stamp, the cohort in bits 3..10 and the census generation in 11..18), and the gate (kGateBits).
 * One word, read with one relaxed load. Written by the census (a compare-and-swap that keeps the
 * gate) and the gate (atomic or / and). */
static _Atomic uint64_t g_census_clock = 1; /* ClockOf(0), the gate open */
/* The born and freed sums per cohort at the census's start (what earlier generations left). */
static leakbound_heap_cohort g_born_origin[kCohorts];
static leakbound_heap_cohort g_census_origin[kCohorts];
static pthread_key_t g_release_key;
static _Atomic int g_release_key_ready;
static const char *g_mode = "none";
static const char *g_unavailable = "interposer not initialised";

static LB_TLS ThreadState t_state = {.chunk_stretch = kNoStretch};

/* Slot 0, shared by the threads past kThreadSlots - 1 live ones. */
static inline int IsShared(const ThreadCounters *c) { return c == &g_threads[0]; }

/* ---- per-thread counters ---------------------------------------------------------------- */

static inline int64_t Load(_Atomic int64_t *field) {
  return atomic_load_explicit(field, memory_order_relaxed);
}

/* The owner's add (heap_core.h): no lock prefix. */
static inline void Bump(_Atomic int64_t *field, int64_t delta) { LeakboundOwnerAdd(field, delta); }
static inline void Drop(_Atomic int64_t *field, int64_t delta) { LeakboundOwnerSub(field, delta); }

static void ReleaseThreadCounters(void *slot) {
  ThreadCounters *c = (ThreadCounters *)slot;
  t_state.counters = NULL;
  t_state.own = NULL;
  t_state.counting = NULL;
  atomic_store_explicit(&c->owned, 0, memory_order_release);
}

static __attribute__((noinline)) ThreadCounters *ClaimThreadCounters(void) {
  ThreadCounters *claimed = &g_threads[0];
  for (int i = 1; i < kThreadSlots; ++i) {
    int expected = 0;
    if (atomic_load_explicit(&g_threads[i].owned, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong_explicit(&g_threads[i].owned, &expected, 1,
                                                memory_order_acquire, memory_order_relaxed)) {
      claimed = &g_threads[i];
      claimed->slot1 = (uint32_t)i + 1;
      int used = atomic_load_explicit(&g_threads_used, memory_order_relaxed);
      while (used < i + 1 &&
             !atomic_compare_exchange_weak_explicit(&g_threads_used, &used, i + 1,
                                                    memory_order_release, memory_order_relaxed)) {
      }
      break;
    }
  }
  t_state.counters = claimed;
  t_state.own = IsShared(claimed) ? NULL : claimed;
  /* Released at thread exit. A key below PTHREAD_KEY_2NDLEVEL_SIZE needs no allocation; if glibc
   * ever did allocate here, the nested malloc is excluded. */
  if (claimed != &g_threads[0] &&
      atomic_load_explicit(&g_release_key_ready, memory_order_acquire)) {
    ++t_state.exclude_depth;
    pthread_setspecific(g_release_key, claimed);
    --t_state.exclude_depth;
  }
  if (t_state.exclude_depth == 0) t_state.counting = t_state.own;
  return claimed;
}

/* This thread's slot, for frees (counted even while excluded). */
static inline ThreadCounters *Counters(void) {
  ThreadCounters *c = t_state.counters;
  return LB_LIKELY(c != NULL) ? c : ClaimThreadCounters();
}

/* This thread's slot if its allocations are counted now, else NULL. */
static __attribute__((noinline)) ThreadCounters *CountingCountersSlow(void) {
  if (t_state.exclude_depth > 0 ||
      (atomic_load_explicit(&g_census_clock, memory_order_relaxed) & kGatePaused)) {
    return NULL;
  }
  ThreadCounters *c = t_state.counters ? t_state.counters : ClaimThreadCounters();
  t_state.counting = t_state.own;
  return c;
}

static inline ThreadCounters *CountingCounters(void) {
  ThreadCounters *c = t_state.counting;
  if (LB_UNLIKELY(c == NULL ||
                  (atomic_load_explicit(&g_census_clock, memory_order_relaxed) & kGatePaused))) {
    return CountingCountersSlow();
  }
  return c;
}


/* A record's birth stamp is the census clock's stamp when it was allocated (the clock's bits
 * 3..18, CurrentEpoch): the census generation (the stamp's bits 8..15) and the cohort (0..7). A
 * block of an earlier census (another generation) is freed into the older cohort (FreedBook). */
static inline unsigned CurrentEpoch(uint64_t clock) {
  return ((unsigned)clock >> kStampShift) & 0xffff;
}

/* The clock word of stamp, the gate open: the record word's valid bit and the stamp in its place
 * (Pack's), so that an allocation makes its record word from the clock's load with two ors (the
 * size, the offset) and finds its book in the same bits (BookAt). */
static inline uint64_t ClockOf(unsigned stamp) { return 1u | (uint64_t)stamp << kStampShift; }

/* Where a birth or a free seen at `clock` is booked: `cohort` in the books of the clock's
 * generation parity. A thread that read the clock just before a census started books into the
 * other generation's books, which the new census does not read (its origin is taken from its
 * own), so a birth or free straddling the start can neither add a survivor nor hide one. */
static inline unsigned Book(uint64_t clock, unsigned cohort) {
  return ((CurrentEpoch(clock) >> 8) & 1) * (unsigned)kCohorts + cohort;
}

/* The book of a block stamped at `clock`: its birth cohort, FreedBook(clock, CurrentEpoch(clock)). */
static inline unsigned BirthBook(uint64_t clock) { return CurrentEpoch(clock) & 0x1ff; }

/* Where a block is booked when freed at `clock`, from its record word's bits as they are (or a
 * stamp in their place): its birth cohort in the books of the clock's generation, or the older
 * cohort when it was born in an earlier generation. With 256 cohorts a generation, a stamp of the
 * clock's own generation is its book's number (the generation's low bit, then the cohort), so
 * the common case is a test; the book's number is then in bits 3..11 (BookAt). */
_Static_assert(kCohorts == 256, "FreedBits: a stamp's low 9 bits are its book");
static inline uint32_t FreedBits(uint64_t clock, uint32_t word) {
  uint32_t bits = word;
  if (LB_UNLIKELY((((uint32_t)clock ^ word) & (0xff00u << kStampShift)) != 0)) {
    bits = ((uint32_t)clock & (0x100u << kStampShift)) | (uint32_t)kOlderCohort << kStampShift;
    __asm__("" : "+r"(bits)); /* a branch, not a conditional move of both: rarely taken */
  }
  return bits;
}

/* FreedBits for a block born at `stamp` (LeakboundHeapTaken.epoch): its book's number. */
static inline unsigned FreedBook(uint64_t clock, unsigned stamp) {
  return (FreedBits(clock, (uint32_t)stamp << kStampShift) >> kStampShift) & 0x1ff;
}

/* The common paths' books, from a record word or a clock as they are (the stamp's low 9 bits,
 * the book's number, in bits 3..11): c's book, with no shift (32-byte books: the masked bits
 * times 4, an address mode's scale). */
_Static_assert(sizeof(BookCounts) == 32 && kStampShift == 3, "BookAt: the bits' scale");
static inline BookCounts *BookAt(ThreadCounters *c, uint32_t bits) {
  return (BookCounts *)((char *)c->books + (size_t)(bits & (0x1ffu << kStampShift)) * 4);
}

/* The shared slot's books: locked adds, CAS peak. */
static __attribute__((noinline)) void CountSharedAllocated(ThreadCounters *c, uint64_t size,
                                                           unsigned book) {
  atomic_fetch_add_explicit(&c->books[book].born_bytes, (int64_t)size, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->books[book].born_blocks, 1, memory_order_relaxed);
  int64_t live = atomic_fetch_add_explicit(&c->live_bytes, (int64_t)size, memory_order_relaxed) +
                 (int64_t)size;
  int64_t peak = Load(&c->peak_bytes);
  while (live > peak &&
         !atomic_compare_exchange_weak_explicit(&c->peak_bytes, &peak, live, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  atomic_fetch_add_explicit(&c->allocations, 1, memory_order_relaxed);
  if (LEAKBOUND_HEAP_TOTAL_BYTES) {
    atomic_fetch_add_explicit(&c->total_bytes, (int64_t)size, memory_order_relaxed);
  }
}

static __attribute__((noinline)) void CountSharedFreed(ThreadCounters *c, uint64_t size,
                                                       unsigned book) {
  atomic_fetch_add_explicit(&c->books[book].freed_bytes, (int64_t)size, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->books[book].freed_blocks, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&c->live_bytes, (int64_t)size, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->frees, 1, memory_order_relaxed);
}

/* The peak: a reset (another thread) stores live_bytes into peak_bytes; the owner stores only a
 * larger value, so it never undoes a reset except with a value live at the reset itself. */
static inline void CountOwnAllocatedAt(ThreadCounters *c, uint64_t size, BookCounts *book) {
  Bump(&book->born_bytes, (int64_t)size);
  Bump(&book->born_blocks, 1);
  int64_t live = Load(&c->live_bytes) + (int64_t)size;
  atomic_store_explicit(&c->live_bytes, live, memory_order_relaxed);
  if (live > Load(&c->peak_bytes))
    atomic_store_explicit(&c->peak_bytes, live, memory_order_relaxed);
  Bump(&c->allocations, 1);
  if (LEAKBOUND_HEAP_TOTAL_BYTES) Bump(&c->total_bytes, (int64_t)size);
}

static inline void CountOwnAllocated(ThreadCounters *c, uint64_t size, unsigned book) {
  CountOwnAllocatedAt(c, size, &c->books[book]);
}

static inline void CountAllocated(ThreadCounters *c, uint64_t size, unsigned book) {
  if (LB_UNLIKELY(IsShared(c))) {
    CountSharedAllocated(c, size, book);
    return;
  }
  CountOwnAllocated(c, size, book);
}

static inline void CountOwnFreedAt(ThreadCounters *c, uint64_t size, BookCounts *book) {
  Bump(&book->freed_bytes, (int64_t)size);
  Bump(&book->freed_blocks, 1);
  Drop(&c->live_bytes, (int64_t)size);
  Bump(&c->frees, 1);
}

static inline void CountOwnFreed(ThreadCounters *c, uint64_t size, unsigned book) {
  CountOwnFreedAt(c, size, &c->books[book]);
}

static inline void CountFreed(ThreadCounters *c, uint64_t size, unsigned book) {
  if (LB_UNLIKELY(IsShared(c))) {
    CountSharedFreed(c, size, book);
    return;
  }
  CountOwnFreed(c, size, book);
}

static __attribute__((noinline)) void CountUntracked(ThreadCounters *c) {
  atomic_fetch_add_explicit(&c->untracked_allocations, 1, memory_order_relaxed);
  atomic_store_explicit(&g_degraded, 1, memory_order_relaxed);
}

/* ---- the records ------------------------------------------------------------------------ */

/* Anonymous memory for the tables, by raw syscall so that no interposed mmap sees it; NULL when
 * the kernel refuses (address space or commit limits: the block goes untracked). */
static void *MapTable(size_t bytes) {
  long mapped = syscall(SYS_mmap, NULL, bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return mapped == -1 ? NULL : (void *)mapped;
}

static inline size_t RegionOf(uintptr_t key) { return key >> kRegionBits; }

/* A key no block of malloc's can have: at or above 2^47, or not 8-byte aligned. One test. */
static inline int BadKey(uintptr_t key) {
  return (key & (~(((uintptr_t)1 << kAddressBits) - 1) | 7)) != 0;
}

static inline size_t ChunkOf(uintptr_t key) {
  return (key >> kChunkBits) & (kChunksPerRegion - 1);
}

/* key's record in its chunk: its granule within the chunk's 256 KiB (the mask keeps any key's
 * index inside the chunk's arrays). */
static inline size_t RecordIndex(uintptr_t key) {
  return (key & (((uintptr_t)1 << kChunkBits) - 1)) >> kGranuleShift;
}

/* key's chunk of records if mapped, else NULL (also for a key at or above 2^47), when it is not
 * the one this thread found last (FindRecord's miss; the found one becomes this thread's). The
 * chunk a thread found last is kept in its state: a heap hands out neighbouring blocks, and two
 * dependent loads (directory, chunk) become one compare. Safe because a published chunk is never
 * unmapped. A hit also says that key is below 2^47 (the cached stretch is of such a key, or
 * kNoStretch, which no key's is), so the hooks test a key's high bits only on a miss. */
static inline Chunk *FindChunkMissed(uintptr_t key) {
  if (LB_UNLIKELY(key >> kAddressBits)) return NULL;
  Directory *directory = atomic_load_explicit(&g_regions[RegionOf(key)], memory_order_acquire);
  if (LB_UNLIKELY(directory == NULL)) return NULL;
  Chunk *chunk = atomic_load_explicit(&directory->chunks[ChunkOf(key)], memory_order_acquire);
  /* A signal handler's malloc on this thread may run between any two of these stores. The
   * stretch says kUpdating meanwhile, which no key's stretch is, so the handler misses and, seeing
   * an update under way, leaves the cache to it (its own record comes from the chunk it found);
   * a handler that ran before the first store has finished its update, which this one overwrites
   * whole. */
  if (chunk != NULL && t_state.chunk_stretch != kUpdating) {
    const uintptr_t stretch = key >> kChunkBits;
    t_state.chunk_stretch = kUpdating;
    atomic_signal_fence(memory_order_seq_cst);
    t_state.chunk = chunk;
    atomic_signal_fence(memory_order_seq_cst);
    t_state.chunk_stretch = stretch;
  }
  return chunk;
}

/* key's record: its word and its site in the chunk that holds them, and 1; 0 when that chunk is
 * not mapped (or key is at or above 2^47). From the thread's chunk on a hit: a compare, a load,
 * and an indexed address. */
static inline int FindRecord(uintptr_t key, _Atomic uint32_t **word, _Atomic uint16_t **site) {
  Chunk *chunk;
  if (LB_LIKELY((key >> kChunkBits) == t_state.chunk_stretch)) {
    /* A signal handler's malloc between the test and this load can leave another chunk here
     * (never NULL): the index stays inside it (RecordIndex's mask), so such a race at worst
     * touches a record of that chunk, never memory outside the tables. */
    chunk = t_state.chunk;
    if (chunk == NULL) __builtin_unreachable(); /* the callers' NULL tests go on a hit */
  } else {
    chunk = FindChunkMissed(key); /* found now, not read back from the cache */
    if (LB_UNLIKELY(chunk == NULL)) return 0;
  }
  *word = &chunk->word[RecordIndex(key)];
  *site = &chunk->site[RecordIndex(key)]; /* read by the call-site paths only */
  return 1;
}

/* Writes a zero into each page of [table, table + bytes) of a table not yet published, so that
 * its pages are mapped by a write. A page first read (FindChunkMissed's directory load, a record word's
 * check for a stale record) maps the kernel's shared zero page, and the first store after that
 * copies it and flushes the TLB of every CPU that runs one of the program's threads: an
 * inter-processor interrupt per page: ~3,100 such faults in `import torch` under watch, ~45 ms
 * of it on this machine's virtual CPUs (docs/watch.md, "Overhead"). */
static void TouchPages(void *table, size_t bytes) {
  for (size_t at = 0; at < bytes; at += 4096) {
    atomic_store_explicit((_Atomic uint32_t *)((char *)table + at), 0, memory_order_relaxed);
  }
}

/* Maps what key's record needs on its first block (a directory, a chunk); NULL when mmap fails
 * (retried next time). A chunk first mapped for a small block is in a heap that fills from one
 * end (glibc's main heap or an arena's), whose blocks will use every page of its words: they are
 * all touched before it is published. One mapped for a large block (glibc maps those one by
 * one, wherever the kernel puts them) gets only its record's page touched. */
static __attribute__((noinline)) Chunk *MapChunk(uintptr_t key, uint64_t size) {
  _Atomic(Directory *) *region = &g_regions[RegionOf(key)];
  Directory *directory = atomic_load_explicit(region, memory_order_acquire);
  if (directory == NULL) {
    Directory *mine = (Directory *)MapTable(sizeof(Directory));
    if (mine == NULL) return NULL;
    TouchPages(mine, sizeof(Directory));
    if (atomic_compare_exchange_strong_explicit(region, &directory, mine, memory_order_acq_rel,
                                                memory_order_acquire)) {
      directory = mine;
    } else {
      syscall(SYS_munmap, mine, sizeof(Directory)); /* another thread mapped it first */
    }
  }
  _Atomic(Chunk *) *slot = &directory->chunks[ChunkOf(key)];
  Chunk *chunk = atomic_load_explicit(slot, memory_order_acquire);
  if (chunk == NULL) {
    Chunk *mine = (Chunk *)MapTable(sizeof(Chunk));
    if (mine == NULL) return NULL;
    if (size < kDenseBlockMax) {
      TouchPages(mine->word, sizeof mine->word);
    } else {
      TouchPages((void *)((uintptr_t)&mine->word[RecordIndex(key)] & ~(uintptr_t)4095), 4);
    }
    if (atomic_compare_exchange_strong_explicit(slot, &chunk, mine, memory_order_acq_rel,
                                                memory_order_acquire)) {
      chunk = mine;
    } else {
      syscall(SYS_munmap, mine, sizeof(Chunk));
    }
  }
  return chunk;
}

/* ---- large blocks ---------------------------------------------------------------------- */

static inline size_t LargeSlots(int table) { return (size_t)kLargeFirstSlots << table; }

static inline size_t LargeHome(uintptr_t key, int table) {
  return (size_t)(((uint64_t)(key >> 4) * 0x9E3779B97F4A7C15ull) >> (64 - 12 - table));
}

/* Table `table`, mapped on first use; NULL when the kernel refuses. */
static LargeEntry *LargeTable(int table) {
  LargeEntry *entries = atomic_load_explicit(&g_large[table], memory_order_acquire);
  if (entries != NULL) return entries;
  LargeEntry *mine = (LargeEntry *)MapTable(sizeof(LargeEntry) * LargeSlots(table));
  if (mine == NULL) return NULL;
  if (atomic_compare_exchange_strong_explicit(&g_large[table], &entries, mine,
                                              memory_order_acq_rel, memory_order_acquire)) {
    return mine;
  }
  syscall(SYS_munmap, mine, sizeof(LargeEntry) * LargeSlots(table));
  return entries;
}

/* Inserts key's size into the first table less than half full: the table's number, or -1 when
 * none has room (or none could be mapped). */
static __attribute__((noinline)) int LargePut(uintptr_t key, uint64_t size) {
  for (int table = 0; table < kLargeTables; ++table) {
    const size_t slots = LargeSlots(table);
    if (atomic_load_explicit(&g_large_live[table], memory_order_relaxed) >= (int64_t)slots / 2) {
      continue;
    }
    LargeEntry *entries = LargeTable(table);
    if (entries == NULL) return -1;
    const size_t home = LargeHome(key, table);
    for (size_t i = 0; i < slots; ++i) {
      LargeEntry *entry = &entries[(home + i) & (slots - 1)];
      uintptr_t seen = atomic_load_explicit(&entry->key, memory_order_relaxed);
      while (seen == 0 || seen == kLargeTombstone) {
        if (atomic_compare_exchange_weak_explicit(&entry->key, &seen, key, memory_order_relaxed,
                                                  memory_order_relaxed)) {
          /* Read only by whoever frees the block, after the allocator handed it over. */
          atomic_store_explicit(&entry->size, size, memory_order_relaxed);
          atomic_fetch_add_explicit(&g_large_live[table], 1, memory_order_relaxed);
          return table;
        }
      }
    }
  }
  return -1;
}

/* Removes key's entry from table `table` and returns its size (0 when absent, which a matching
 * record rules out). */
static __attribute__((noinline)) uint64_t LargeTake(uintptr_t key, int table) {
  LargeEntry *entries = atomic_load_explicit(&g_large[table], memory_order_acquire);
  if (entries == NULL) return 0;
  const size_t slots = LargeSlots(table);
  const size_t home = LargeHome(key, table);
  for (size_t i = 0; i < slots; ++i) {
    LargeEntry *entry = &entries[(home + i) & (slots - 1)];
    const uintptr_t seen = atomic_load_explicit(&entry->key, memory_order_relaxed);
    if (seen == key) {
      const uint64_t size = atomic_load_explicit(&entry->size, memory_order_relaxed);
      atomic_store_explicit(&entry->key, kLargeTombstone, memory_order_relaxed);
      atomic_fetch_sub_explicit(&g_large_live[table], 1, memory_order_relaxed);
      return size;
    }
    if (seen == 0) break;
  }
  return 0;
}

/* ---- records ---------------------------------------------------------------------------- */

static inline uint32_t OffsetField(uintptr_t key) {
  return (uint32_t)((key & kGranuleMask) >> 3);
}

static inline uint32_t Pack(uintptr_t key, uint32_t size_field, unsigned stamp) {
  return 1u | OffsetField(key) << kOffsetShift | size_field << kSizeShift |
         (uint32_t)stamp << kStampShift;
}

/* Pack(key, size_field, CurrentEpoch(clock)), from the clock word's low half (`bits`: the gate's
 * bits clear). */
static inline uint32_t PackAt(uintptr_t key, uint32_t size_field, uint32_t bits) {
  /* OffsetField(key) << kOffsetShift, in one shift and one mask (key is 8-byte aligned). */
  const uint32_t offset =
      (uint32_t)(key >> (3 - kOffsetShift)) & (uint32_t)((kGranuleMask >> 3) << kOffsetShift);
  return bits | offset | size_field << kSizeShift;
}

static inline unsigned StampOf(uint32_t word) { return (word >> kStampShift) & 0xffff; }

/* Whether a set record word is key's: its offset field is the key's offset in the granule and the
 * key is 8-byte aligned, in one compare. The word shifted so that its offset field lies over the
 * key's bits 3..4 puts its valid bit (1) over bit 2, so the key's low 5 bits XOR it are exactly
 * 4 (0b00100) when both hold, and any other value when the offset differs or a bit of 0..2 is
 * set. (An empty word can match a key whose low bits are 4, never a block's: RecordFind returns
 * that word, kEmpty, either way; the free paths' FreeFast does not test for it, and would book a
 * free of 0 bytes for such a pointer, which glibc's free then aborts on.) */
_Static_assert(kOffsetShift == 1 && kGranuleShift >= 3 && kGranuleShift <= 5,
               "MatchesOffset: the word's bit layout");
static inline int MatchesOffset(uint32_t word, uintptr_t key) {
  return ((((uintptr_t)word << (3 - kOffsetShift)) ^ key) & kGranuleMask) == 4;
}

/* A record's size: inline, or its large table's (which the entry leaves). */
_Static_assert(kSizeShift + kSizeBits == 32, "SizeField: the size is the word's top bits");
static inline uint32_t SizeField(uint32_t word) { return word >> kSizeShift; }

static inline uint64_t SizeOf(uint32_t word, uintptr_t address) {
  const uint32_t field = SizeField(word);
  return LB_LIKELY(field < (uint32_t)kLargeField) ? field
                                                  : LargeTake(address, (int)(field - kLargeField));
}

static inline void StoreSite(_Atomic uint16_t *slot, uint32_t site) {
  atomic_store_explicit(slot, (uint16_t)site, memory_order_relaxed);
  if (LB_UNLIKELY(!atomic_load_explicit(&g_sites_stored, memory_order_relaxed))) {
    atomic_store_explicit(&g_sites_stored, 1, memory_order_relaxed);
  }
}

/* key's record word (where it and its site are in *word, *site), or kEmpty when key was not
 * recorded (no record, another block's, or an address no block of malloc's can have). */
static inline uint32_t RecordFind(uintptr_t key, _Atomic uint32_t **word,
                                  _Atomic uint16_t **site) {
  if (LB_UNLIKELY(!FindRecord(key, word, site))) return kEmpty; /* tests the key's high bits */
  const uint32_t value = atomic_load_explicit(*word, memory_order_relaxed);
  return MatchesOffset(value, key) ? value : kEmpty; /* an empty word is kEmpty either way */
}

/* Clears key's record and returns its size, site (when site is not NULL; a run without call
 * sites never reads their array) and birth stamp; 0 when key was not recorded. */
static inline int RecordTake(uintptr_t key, uint64_t *size, uint32_t *site, unsigned *epoch) {
  _Atomic uint32_t *at;
  _Atomic uint16_t *site_at;
  const uint32_t word = RecordFind(key, &at, &site_at);
  if (word == kEmpty) return 0;
  atomic_store_explicit(at, kEmpty, memory_order_relaxed);
  if (site) {
    *site = atomic_load_explicit(site_at, memory_order_relaxed);
    if (*site != 0) atomic_store_explicit(site_at, 0, memory_order_relaxed);
  }
  *size = SizeOf(word, key);
  *epoch = StampOf(word);
  return 1;
}

/* Records key (size, site, born in `epoch`); 0 when it cannot be recorded. A record still set is
 * stale (two live blocks never share a granule): its size leaves c's books. */
static inline int RecordPut(ThreadCounters *c, uintptr_t key, uint64_t size, uint32_t site,
                            unsigned epoch, uint64_t clock) {
  if (LB_UNLIKELY(BadKey(key))) return 0;
  _Atomic uint32_t *at;
  _Atomic uint16_t *site_at;
  if (LB_UNLIKELY(!FindRecord(key, &at, &site_at))) {
    Chunk *chunk = MapChunk(key, size);
    if (chunk == NULL) return 0;
    at = &chunk->word[RecordIndex(key)];
    site_at = &chunk->site[RecordIndex(key)];
  }
  const uint32_t stale = atomic_load_explicit(at, memory_order_relaxed);
  if (LB_UNLIKELY(stale != kEmpty)) {
    atomic_store_explicit(at, kEmpty, memory_order_relaxed);
    atomic_store_explicit(site_at, 0, memory_order_relaxed);
    const uintptr_t stale_address =
        (key & ~kGranuleMask) | (uintptr_t)(((stale >> kOffsetShift) & 3) << 3);
    CountFreed(c, SizeOf(stale, stale_address), FreedBook(clock, StampOf(stale)));
  }
  uint32_t size_field = (uint32_t)size;
  if (LB_UNLIKELY(size > kInlineSizeMax)) {
    const int table = LargePut(key, size);
    if (table < 0) return 0;
    size_field = (uint32_t)kLargeField + (uint32_t)table;
  }
  if (site != 0) StoreSite(site_at, site);
  atomic_store_explicit(at, Pack(key, size_field, epoch), memory_order_relaxed);
  return 1;
}

/* ---- the hooks -------------------------------------------------------------------------- */

/* The allocation path in general: slots to claim, tables to map, the shared slot, untracked
 * blocks. Out of line, so that the common path below calls nothing and saves no register. */
static __attribute__((noinline)) int OnAllocSlow(const void *block, uint64_t size, uint32_t site,
                                                unsigned *stamp) {
  ThreadCounters *c = CountingCounters();
  if (LB_UNLIKELY(c == NULL)) return 0;
  const uint64_t clock = atomic_load_explicit(&g_census_clock, memory_order_relaxed);
  if (LB_UNLIKELY(!RecordPut(c, (uintptr_t)block, size, site <= kSiteMax ? site : 0,
                             CurrentEpoch(clock), clock))) {
    CountUntracked(c);
    return 0;
  }
  CountAllocated(c, size, BirthBook(clock));
  *stamp = CurrentEpoch(clock);
  return IsShared(c) ? 1 : (int)c->slot1;
}

/* The common path: a counting thread with its own slot, a mapped region, an empty record; all or
 * nothing (0: nothing done, the caller takes OnAllocSlow; 1: done, *slot is the thread's slot + 1).
 * The census clock is read once: its stamp is the block's birth stamp (*stamp), its gate's bits
 * say whether this path may record.
 * sites_said: the caller said that records hold sites (LeakboundHeapSitesStored), so a site is
 * stored without setting g_sites_stored. gate: the gate's bits that stop it (kGateHeld is left
 * out by the general paths: a hold only sends the front end's allocations to its own general
 * path, which records them here). */
static inline int OnAllocFast(const void *block, uint64_t size, uint32_t site, unsigned *stamp,
                              int *slot, int sites_said, int gate) {
  ThreadCounters *c = t_state.counting; /* NULL: excluded, no slot yet, or the shared slot */
  const uintptr_t key = (uintptr_t)block;
  /* The clock, and in it the gate, first: a held front end's allocations leave after one test. */
  const uint64_t clock = atomic_load_explicit(&g_census_clock, memory_order_relaxed);
  /* No BadKey: a block malloc returns is aligned, and FindRecord tests the high bits. */
  if (LB_LIKELY(!(clock & (uint64_t)gate) && c != NULL && size <= kInlineSizeMax &&
                site <= kSiteMax)) {
    _Atomic uint32_t *at;
    _Atomic uint16_t *site_at;
    if (LB_LIKELY(FindRecord(key, &at, &site_at))) {
      if (LB_LIKELY(atomic_load_explicit(at, memory_order_relaxed) == kEmpty)) {
        /* The gate's bits that did not stop this path (a hold, passed) leave the word's. */
        const uint32_t bits = (uint32_t)clock & ~(uint32_t)(kGateBits & ~gate);
        if (site != 0) {
          if (sites_said) {
            atomic_store_explicit(site_at, (uint16_t)site, memory_order_relaxed);
          } else {
            StoreSite(site_at, site);
          }
        }
        atomic_store_explicit(at, PackAt(key, (uint32_t)size, bits), memory_order_relaxed);
        CountOwnAllocatedAt(c, size, BookAt(c, bits));
        *stamp = CurrentEpoch(clock);
        *slot = (int)c->slot1;
        return 1;
      }
    }
  }
  return 0;
}

static inline int OnAlloc(const void *block, uint64_t size, uint32_t site, unsigned *stamp) {
  int slot;
  return LB_LIKELY(OnAllocFast(block, size, site, stamp, &slot, 0, kGatePaused))
             ? slot
             : OnAllocSlow(block, size, site, stamp);
}

int LeakboundHeapOnAllocFast(const void *block, uint64_t size, uint32_t site, unsigned *stamp,
                             int *slot) {
  return OnAllocFast(block, size, site, stamp, slot, 1, kGatePaused | kGateHeld);
}

int LeakboundHeapOnAllocFastInHold(const void *block, uint64_t size, uint32_t site,
                                   unsigned *stamp, int *slot) {
  return OnAllocFast(block, size, site, stamp, slot, 1, kGatePaused);
}

int LeakboundHeapOnAllocAt(const void *block, uint64_t size, uint32_t site) {
  unsigned stamp;
  return OnAlloc(block, size, site, &stamp);
}

int LeakboundHeapOnAllocStamped(const void *block, uint64_t size, uint32_t site,
                                unsigned *stamp) {
  return OnAlloc(block, size, site, stamp);
}

/* OnAllocSlow without a site, its stamp kept here: LeakboundHeapOnAlloc's callers keep no frame of
 * locals for it. */
static __attribute__((noinline)) void OnAllocSlowSiteless(const void *block, uint64_t size) {
  unsigned stamp;
  (void)OnAllocSlow(block, size, 0, &stamp);
}

void LeakboundHeapOnAlloc(const void *block, uint64_t size) {
  unsigned stamp;
  int slot;
  if (LB_UNLIKELY(!OnAllocFast(block, size, 0, &stamp, &slot, 0, kGatePaused))) {
    OnAllocSlowSiteless(block, size);
  }
}

unsigned LeakboundHeapEpochNow(void) {
  return CurrentEpoch(atomic_load_explicit(&g_census_clock, memory_order_acquire));
}

static inline void CountTakenFreed(ThreadCounters *c, uint64_t size, unsigned epoch) {
  const uint64_t clock = atomic_load_explicit(&g_census_clock, memory_order_relaxed);
  CountFreed(c, size, FreedBook(clock, epoch));
}

static __attribute__((noinline)) void OnFreeSlow(uint64_t size, unsigned epoch) {
  CountTakenFreed(Counters(), size, epoch);
}

/* OnFree once a site was stored (by a front end that frees through OnFree after it stored
 * sites): they are cleared with their blocks (a slot must not outlive its block). */
static __attribute__((noinline)) void OnFreeClearingSites(const void *block) {
  uint64_t size;
  uint32_t site;
  unsigned epoch;
  if (RecordTake((uintptr_t)block, &size, &site, &epoch)) {
    CountTakenFreed(Counters(), size, epoch);
  }
}

/* OnFree of a block that holds no call site. */
static inline void OnFreeSiteless(const void *block) {
  uint64_t size;
  unsigned epoch;
  if (RecordTake((uintptr_t)block, &size, NULL, &epoch)) {
    ThreadCounters *c = t_state.own;
    if (LB_UNLIKELY(c == NULL)) {
      OnFreeSlow(size, epoch); /* a thread's first free, or the shared slot */
      return;
    }
    const uint64_t clock = atomic_load_explicit(&g_census_clock, memory_order_relaxed);
    CountOwnFreed(c, size, FreedBook(clock, epoch));
  }
}

void LeakboundHeapOnFree(const void *block) {
  if (LB_UNLIKELY(atomic_load_explicit(&g_sites_stored, memory_order_relaxed))) {
    OnFreeClearingSites(block);
    return;
  }
  OnFreeSiteless(block);
}

void LeakboundHeapOnFreeSiteless(const void *block) { OnFreeSiteless(block); }

void LeakboundHeapSitesStored(void) {
  atomic_store_explicit(&g_sites_stored, 1, memory_order_relaxed);
}

LeakboundHeapTaken LeakboundHeapOnFreeTaken(const void *block) {
  LeakboundHeapTaken taken = {0, 0, 0, 0, 0};
  /* RecordTake itself, not LeakboundHeapTake: that one stays out of line (its callers are many),
   * and this is every free's path with call sites on. */
  if (RecordTake((uintptr_t)block, &taken.size, &taken.site, &taken.epoch)) {
    taken.found = 1;
    ThreadCounters *c = Counters();
    CountTakenFreed(c, taken.size, taken.epoch);
    taken.slot = IsShared(c) ? 0 : c->slot1;
  }
  return taken;
}

/* The common free path of OnFreeFast and OnFreeFastSiteless: on c's own slot, takes key's
 * record and books it (1; its size in *size, its stamp in *stamp, where its site is in *site),
 * finds none (0: nothing to do), or does nothing (-1: a large block, OnFreeTaken's). key is a
 * block's address, 8-byte aligned (MatchesOffset: an empty word is not tested for). */
static inline int FreeFast(uintptr_t key, ThreadCounters *c, uint64_t *size, unsigned *stamp,
                           _Atomic uint16_t **site) {
  _Atomic uint32_t *at;
  if (LB_UNLIKELY(!FindRecord(key, &at, site))) return 0;
  const uint32_t word = atomic_load_explicit(at, memory_order_relaxed);
  if (!MatchesOffset(word, key)) return 0;
  const uint32_t field = SizeField(word);
  if (LB_UNLIKELY(field >= (uint32_t)kLargeField)) return -1;
  atomic_store_explicit(at, kEmpty, memory_order_relaxed);
  *size = field;
  *stamp = StampOf(word);
  const uint64_t clock = atomic_load_explicit(&g_census_clock, memory_order_relaxed);
  CountOwnFreedAt(c, field, BookAt(c, FreedBits(clock, word)));
  return 1;
}

int LeakboundHeapOnFreeFast(const void *block, LeakboundHeapTaken *taken) {
  ThreadCounters *c = t_state.own;
  if (LB_UNLIKELY(c == NULL)) return -1;
  _Atomic uint16_t *site;
  const int took = FreeFast((uintptr_t)block, c, &taken->size, &taken->epoch, &site);
  if (took <= 0) return took;
  taken->site = atomic_load_explicit(site, memory_order_relaxed);
  if (taken->site != 0) atomic_store_explicit(site, 0, memory_order_relaxed);
  taken->found = 1;
  taken->slot = c->slot1;
  return 1;
}

int LeakboundHeapOnFreeFastSiteless(const void *block) {
  ThreadCounters *c = t_state.own;
  if (LB_UNLIKELY(c == NULL)) return 0;
  _Atomic uint16_t *site;
  uint64_t size;
  unsigned stamp;
  return FreeFast((uintptr_t)block, c, &size, &stamp, &site) >= 0; /* 0: none to take */
}

int LeakboundHeapSlotsUsed(void) {
  return atomic_load_explicit(&g_threads_used, memory_order_acquire);
}

LeakboundHeapTaken LeakboundHeapTake(const void *block) {
  LeakboundHeapTaken taken = {0, 0, 0, 0, 0};
  if (RecordTake((uintptr_t)block, &taken.size, &taken.site, &taken.epoch)) {
    taken.found = 1;
  }
  return taken;
}

void LeakboundHeapPutBack(const void *block, LeakboundHeapTaken taken) {
  if (!taken.found) return;
  ThreadCounters *c = Counters();
  const uint64_t clock = atomic_load_explicit(&g_census_clock, memory_order_relaxed);
  if (!RecordPut(c, (uintptr_t)block, taken.size, taken.site, taken.epoch, clock)) {
    /* Only when the large table is full (the block's chunk was mapped when it was recorded):
     * leaves the books. */
    CountFreed(c, taken.size, FreedBook(clock, taken.epoch));
    atomic_store_explicit(&g_degraded, 1, memory_order_relaxed);
  }
}

uint32_t LeakboundHeapForgetTaken(LeakboundHeapTaken taken) {
  if (!taken.found) return 0;
  ThreadCounters *c = Counters();
  CountTakenFreed(c, taken.size, taken.epoch);
  return IsShared(c) ? 0 : c->slot1;
}

void LeakboundHeapSetFrontEnd(const char *mode, const char *unavailable) {
  g_mode = mode;
  g_unavailable = unavailable;
}

__attribute__((constructor(101))) static void InitCore(void) {
  if (pthread_key_create(&g_release_key, ReleaseThreadCounters) == 0) {
    atomic_store_explicit(&g_release_key_ready, 1, memory_order_release);
  }
}

/* ---- the public API (leakbound/watch/heap.h) ------------------------------------------- */

int leakbound_heap_active(void) { return g_unavailable == NULL; }

const char *leakbound_heap_state(void) {
  if (g_unavailable) return g_unavailable;
  if (atomic_load(&g_degraded)) {
    return "active, degraded: some allocations could not be recorded "
           "(untracked_allocations)";
  }
  return "active";
}

const char *leakbound_heap_mode(void) { return g_mode; }

void leakbound_heap_read(leakbound_heap_stats *out) {
  memset(out, 0, sizeof *out);
  int used = atomic_load_explicit(&g_threads_used, memory_order_acquire);
  int64_t live_bytes = 0, peak_bytes = 0, live_allocations = 0;
  for (int i = 0; i < used; ++i) {
    ThreadCounters *c = &g_threads[i];
    live_bytes += Load(&c->live_bytes);
    peak_bytes += Load(&c->peak_bytes);
    live_allocations += Load(&c->allocations) - Load(&c->frees);
    out->total_allocations += (uint64_t)Load(&c->allocations);
    out->total_bytes += (uint64_t)Load(&c->total_bytes);
    out->untracked_allocations += (uint64_t)Load(&c->untracked_allocations);
  }
  out->live_bytes = live_bytes > 0 ? (uint64_t)live_bytes : 0;
  out->live_allocations = live_allocations > 0 ? (uint64_t)live_allocations : 0;
  out->peak_bytes = peak_bytes > live_bytes ? (uint64_t)peak_bytes : out->live_bytes;
}

/* Every slot's peak restarts from its live bytes now (exact when the threads are quiet). */
void leakbound_heap_reset_peak(void) {
  int used = atomic_load_explicit(&g_threads_used, memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    atomic_store_explicit(&g_threads[i].peak_bytes, Load(&g_threads[i].live_bytes),
                          memory_order_relaxed);
  }
}

void leakbound_heap_exclude_begin(void) {
  ++t_state.exclude_depth;
  t_state.counting = NULL;
}

void leakbound_heap_exclude_end(void) {
  if (t_state.exclude_depth > 0 && --t_state.exclude_depth == 0) {
    t_state.counting = t_state.own;
  }
}

int leakbound_heap_excluded(void) { return t_state.exclude_depth > 0; }

void leakbound_heap_set_counting(int on) {
  if (on) {
    atomic_fetch_and(&g_census_clock, ~(uint64_t)kGatePaused);
  } else {
    atomic_fetch_or(&g_census_clock, (uint64_t)kGatePaused);
  }
}

int leakbound_heap_counting(void) { return !(atomic_load(&g_census_clock) & kGatePaused); }

void LeakboundHeapHoldFastPath(int hold) {
  if (hold) {
    atomic_fetch_or(&g_census_clock, (uint64_t)kGateHeld);
  } else {
    atomic_fetch_and(&g_census_clock, ~(uint64_t)kGateHeld);
  }
}

/* Moves the census clock to `stamp`, keeping the gate's bits as they are. */
static void SetClock(unsigned stamp) {
  uint64_t clock = atomic_load(&g_census_clock);
  while (!atomic_compare_exchange_weak(&g_census_clock, &clock,
                                       ClockOf(stamp) | (clock & (uint64_t)kGateBits))) {
  }
}

/* ---- the census (leakbound/watch/heap.h) ------------------------------------------------ */

/* The born and freed sums per cohort over the slots, in the books of `clock`'s generation: every
 * slot's born sums before any slot's freed ones, so that a block made and freed (on any two
 * slots) during the read can only hide a survivor from this census, never add one. */
static void SumCohorts(uint64_t clock, leakbound_heap_cohort *born, leakbound_heap_cohort *freed) {
  memset(born, 0, sizeof(leakbound_heap_cohort) * kCohorts);
  memset(freed, 0, sizeof(leakbound_heap_cohort) * kCohorts);
  const unsigned base = Book(clock, 0);
  int used = atomic_load_explicit(&g_threads_used, memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    for (int k = 0; k < kCohorts; ++k) {
      born[k].bytes += Load(&g_threads[i].books[base + k].born_bytes);
      born[k].blocks += Load(&g_threads[i].books[base + k].born_blocks);
    }
  }
  atomic_thread_fence(memory_order_acquire);
  for (int i = 0; i < used; ++i) {
    for (int k = 0; k < kCohorts; ++k) {
      freed[k].bytes += Load(&g_threads[i].books[base + k].freed_bytes);
      freed[k].blocks += Load(&g_threads[i].books[base + k].freed_blocks);
    }
  }
}

void leakbound_heap_census_start(void) {
  const uint64_t clock = atomic_load(&g_census_clock);
  /* A block of the old generation is freed into the older cohort from the moment the clock
   * moves (so first), and the sums of the cohorts then are the new census's origin. */
  const unsigned started = (((CurrentEpoch(clock) >> 8) + 1) & 0xff) << 8;
  SetClock(started);
  SumCohorts(ClockOf(started), g_born_origin, g_census_origin);
}

int leakbound_heap_next_cohort(void) {
  const uint64_t clock = atomic_load(&g_census_clock);
  const unsigned cohort = CurrentEpoch(clock) & 0xff;
  if (cohort + 1 >= (unsigned)kOlderCohort) return (int)cohort; /* the last takes what follows */
  SetClock((CurrentEpoch(clock) & ~0xffu) | (cohort + 1));
  return (int)cohort + 1;
}

int leakbound_heap_cohort_now(void) {
  return (int)(CurrentEpoch(atomic_load(&g_census_clock)) & 0xff);
}

int leakbound_heap_census(leakbound_heap_cohort *out, int capacity) {
  leakbound_heap_cohort born[kCohorts], freed[kCohorts];
  SumCohorts(atomic_load(&g_census_clock), born, freed);
  const int count = leakbound_heap_cohort_now() + 1;
  for (int k = 0; k < count && k < capacity; ++k) {
    out[k].bytes = (born[k].bytes - g_born_origin[k].bytes) - (freed[k].bytes - g_census_origin[k].bytes);
    out[k].blocks =
        (born[k].blocks - g_born_origin[k].blocks) - (freed[k].blocks - g_census_origin[k].blocks);
    if (out[k].bytes < 0) out[k].bytes = 0; /* freed by one slot while read on another */
    if (out[k].blocks < 0) out[k].blocks = 0;
  }
  return count;
}
