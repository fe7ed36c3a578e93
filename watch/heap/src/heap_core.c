/* The hook core of the exact host-heap interposer: per-allocation records and lock-free counters.
 * The front ends (interpose_glibc.c, interpose_sanitizer.c, later the `watch` preload) call the
 * LeakboundHeapOn* functions from inside malloc/free; nothing here allocates, locks or blocks.
 *
 * Metadata: a lock-free open-addressing table keyed by the block's address, mmap'd once
 * (MAP_NORESERVE: 64 MiB of address space, pages committed as they are first touched). Chosen
 * over a header in front of each block because (1) the user pointer stays glibc's own, so
 * malloc_usable_size, memalign and realloc need no translation and a pointer we never saw
 * (allocated before the library loaded, by ld.so, or while excluded) is simply not found;
 * (2) the same table serves the sanitizer mode, where no header can be added. The price: one
 * CAS per recorded allocation and a probe per free (about +20 ns per malloc/free pair here, see
 * docs/heap.md), and the table's resident pages (below).
 * Slot index = (address >> 5) plus a hash of the 128 MiB region the address lies in: distinct
 * live glibc blocks are >= 32 bytes apart, so neighbours in the heap take neighbouring slots
 * without colliding, and the table commits about half the span of the small-block heap (16-byte
 * records per 32 bytes of address), at most 64 MiB. A free clears its slot to a tombstone; an
 * insert reuses tombstones; probes are bounded (kMaxProbe), and a block that finds no slot is
 * counted in untracked_allocations (not in live_bytes) and the state says "degraded".
 * Record: key + one word of size (40 bits, up to 1 TiB) and call-site id (24 bits, 0 for now:
 * room for `leakbound watch`'s per-call-site outstanding bytes).
 *
 * Counters: live_bytes and peak_bytes are process-wide atomics (the peak needs the exact sum at
 * each allocation); live_allocations and the totals sit in per-thread slots written only by
 * their owner (relaxed load + store, no lock prefix) and summed by leakbound_heap_read. A slot
 * keeps its values when its thread exits and is reused by the next thread, so the sum stays
 * exact; when all slots are taken, threads share slot 0 with atomic read-modify-writes. */
#include "heap_core.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "leakbound/watch/heap.h"

#define LB_TLS __thread __attribute__((tls_model("initial-exec")))

enum {
  kTableBits = 22,     /* 4 Mi slots x 16 bytes = 64 MiB of address space */
  kMaxProbe = 64,      /* slots an insert or lookup inspects at most */
  kThreadSlots = 1024, /* per-thread counter slots; slot 0 is shared */
  kSizeBits = 40,      /* meta word: size in the low bits, call site above */
};
static const uintptr_t kEmpty = 0;
static const uintptr_t kTombstone = 1; /* never a block address (blocks are aligned) */

typedef struct Record {
  _Atomic uintptr_t key;
  _Atomic uint64_t meta;
} Record;

typedef struct ThreadCounters {
  _Atomic int owned;
  int shared;
  _Atomic int64_t live_allocations;
  _Atomic uint64_t total_allocations;
  _Atomic uint64_t total_bytes;
  _Atomic uint64_t untracked_allocations;
} __attribute__((aligned(64))) ThreadCounters;

static _Atomic(Record*) g_table;
static _Atomic int g_table_failed;
static _Atomic uint64_t g_live_bytes;
static _Atomic uint64_t g_peak_bytes;
static _Atomic int g_paused;
static _Atomic int g_degraded;
static ThreadCounters g_threads[kThreadSlots] = {{.owned = 1, .shared = 1}};
static _Atomic int g_threads_used = 1; /* slots [0, used) have been claimed at least once */
static pthread_key_t g_release_key;
static _Atomic int g_release_key_ready;
static const char* g_mode = "none";
static const char* g_unavailable = "interposer not initialised";

static LB_TLS int t_exclude_depth;
static LB_TLS ThreadCounters* t_counters;

/* ---- per-thread counters ---------------------------------------------------------------- */

static void AddSigned(ThreadCounters* c, _Atomic int64_t* field, int64_t delta) {
  if (c->shared) {
    atomic_fetch_add_explicit(field, delta, memory_order_relaxed);
  } else {
    atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) + delta,
                          memory_order_relaxed);
  }
}

static void AddUnsigned(ThreadCounters* c, _Atomic uint64_t* field, uint64_t delta) {
  if (c->shared) {
    atomic_fetch_add_explicit(field, delta, memory_order_relaxed);
  } else {
    atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) + delta,
                          memory_order_relaxed);
  }
}

static void ReleaseThreadCounters(void* slot) {
  ThreadCounters* c = (ThreadCounters*)slot;
  t_counters = NULL;
  atomic_store_explicit(&c->owned, 0, memory_order_release);
}

static ThreadCounters* ClaimThreadCounters(void) {
  ThreadCounters* claimed = &g_threads[0];
  for (int i = 1; i < kThreadSlots; ++i) {
    int expected = 0;
    if (atomic_load_explicit(&g_threads[i].owned, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong_explicit(&g_threads[i].owned, &expected, 1,
                                                memory_order_acquire, memory_order_relaxed)) {
      claimed = &g_threads[i];
      int used = atomic_load_explicit(&g_threads_used, memory_order_relaxed);
      while (used < i + 1 &&
             !atomic_compare_exchange_weak_explicit(&g_threads_used, &used, i + 1,
                                                    memory_order_release, memory_order_relaxed)) {
      }
      break;
    }
  }
  t_counters = claimed;
  /* Released at thread exit. A key below PTHREAD_KEY_2NDLEVEL_SIZE needs no allocation; if
   * glibc ever did allocate here, the nested malloc finds t_counters already set. */
  if (claimed != &g_threads[0] &&
      atomic_load_explicit(&g_release_key_ready, memory_order_acquire)) {
    ++t_exclude_depth;
    pthread_setspecific(g_release_key, claimed);
    --t_exclude_depth;
  }
  return claimed;
}

static ThreadCounters* Counters(void) {
  ThreadCounters* c = t_counters;
  return c ? c : ClaimThreadCounters();
}

/* ---- the table -------------------------------------------------------------------------- */

static Record* Table(void) {
  Record* table = atomic_load_explicit(&g_table, memory_order_acquire);
  if (table || atomic_load_explicit(&g_table_failed, memory_order_relaxed)) return table;
  size_t bytes = sizeof(Record) << kTableBits;
  void* mapped =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) {
    atomic_store(&g_table_failed, 1);
    return NULL;
  }
  Record* expected = NULL;
  if (!atomic_compare_exchange_strong(&g_table, &expected, (Record*)mapped)) {
    munmap(mapped, bytes);
    return expected;
  }
  return (Record*)mapped;
}

static size_t SlotOf(uintptr_t key) {
  uint64_t region = (uint64_t)(key >> 27) * 0x9E3779B97F4A7C15ull;
  return (size_t)((key >> 5) + (region >> 40)) & (((size_t)1 << kTableBits) - 1);
}

static size_t Next(size_t slot) { return (slot + 1) & (((size_t)1 << kTableBits) - 1); }

/* Finds and tombstones the record of key; returns it in *meta. Only the block's owner frees
 * it, so nobody else writes a slot holding a live key: the tombstone is a plain store. */
static int TableRemove(Record* table, uintptr_t key, uint64_t* meta) {
  size_t slot = SlotOf(key);
  for (int probe = 0; probe < kMaxProbe; ++probe, slot = Next(slot)) {
    uintptr_t seen = atomic_load_explicit(&table[slot].key, memory_order_acquire);
    if (seen == key) {
      *meta = atomic_load_explicit(&table[slot].meta, memory_order_relaxed);
      atomic_store_explicit(&table[slot].key, kTombstone, memory_order_release);
      return 1;
    }
    if (seen == kEmpty) return 0;
  }
  return 0;
}

/* Inserts key; 0 when no slot was free within kMaxProbe. A stale record of the same address
 * (its free bypassed the hooks) is replaced and its bytes are dropped from live_bytes. */
static int TableInsert(Record* table, uintptr_t key, uint64_t meta, uint64_t* stale_meta,
                       int* had_stale) {
  size_t slot = SlotOf(key);
  *had_stale = 0;
  for (int probe = 0; probe < kMaxProbe; ++probe, slot = Next(slot)) {
    uintptr_t seen = atomic_load_explicit(&table[slot].key, memory_order_relaxed);
    if (seen == key) {
      *stale_meta = atomic_load_explicit(&table[slot].meta, memory_order_relaxed);
      *had_stale = 1;
      atomic_store_explicit(&table[slot].meta, meta, memory_order_relaxed);
      return 1;
    }
    /* Claim the key first, then write meta: only this block's free reads it, and that free
     * happens after this malloc returned. */
    if ((seen == kEmpty || seen == kTombstone) &&
        atomic_compare_exchange_strong_explicit(&table[slot].key, &seen, key, memory_order_relaxed,
                                                memory_order_relaxed)) {
      atomic_store_explicit(&table[slot].meta, meta, memory_order_relaxed);
      return 1;
    }
  }
  return 0;
}

/* ---- counting --------------------------------------------------------------------------- */

static void CountLive(uint64_t size) {
  uint64_t live = atomic_fetch_add_explicit(&g_live_bytes, size, memory_order_relaxed) + size;
  uint64_t peak = atomic_load_explicit(&g_peak_bytes, memory_order_relaxed);
  while (live > peak &&
         !atomic_compare_exchange_weak_explicit(&g_peak_bytes, &peak, live, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
}

static void CountFreed(uint64_t meta) {
  uint64_t size = meta & (((uint64_t)1 << kSizeBits) - 1);
  atomic_fetch_sub_explicit(&g_live_bytes, size, memory_order_relaxed);
  ThreadCounters* c = Counters();
  AddSigned(c, &c->live_allocations, -1);
}

void LeakboundHeapOnAlloc(const void* block, uint64_t size) {
  if (t_exclude_depth > 0 || atomic_load_explicit(&g_paused, memory_order_relaxed)) return;
  ThreadCounters* c = Counters();
  Record* table = Table();
  uint64_t stale = 0;
  int had_stale = 0;
  if (!table || size >> kSizeBits ||
      !TableInsert(table, (uintptr_t)block, size, &stale, &had_stale)) {
    AddUnsigned(c, &c->untracked_allocations, 1);
    atomic_store_explicit(&g_degraded, 1, memory_order_relaxed);
    return;
  }
  if (had_stale) CountFreed(stale);
  CountLive(size);
  AddSigned(c, &c->live_allocations, 1);
  AddUnsigned(c, &c->total_allocations, 1);
  AddUnsigned(c, &c->total_bytes, size);
}

void LeakboundHeapOnFree(const void* block) {
  Record* table = atomic_load_explicit(&g_table, memory_order_acquire);
  uint64_t meta;
  if (table && TableRemove(table, (uintptr_t)block, &meta)) CountFreed(meta);
}

LeakboundHeapTaken LeakboundHeapTake(const void* block) {
  LeakboundHeapTaken taken = {0, 0, 0};
  Record* table = atomic_load_explicit(&g_table, memory_order_acquire);
  uint64_t meta;
  if (table && TableRemove(table, (uintptr_t)block, &meta)) {
    taken.found = 1;
    taken.size = meta & (((uint64_t)1 << kSizeBits) - 1);
    taken.site = (uint32_t)(meta >> kSizeBits);
  }
  return taken;
}

void LeakboundHeapPutBack(const void* block, LeakboundHeapTaken taken) {
  if (!taken.found) return;
  uint64_t stale = 0;
  int had_stale = 0;
  Record* table = atomic_load_explicit(&g_table, memory_order_acquire);
  uint64_t meta = taken.size | ((uint64_t)taken.site << kSizeBits);
  if (!TableInsert(table, (uintptr_t)block, meta, &stale, &had_stale)) {
    /* Cannot happen unless the table filled up in between: the block leaves the books. */
    LeakboundHeapForgetTaken(taken);
    atomic_store_explicit(&g_degraded, 1, memory_order_relaxed);
  }
}

void LeakboundHeapForgetTaken(LeakboundHeapTaken taken) {
  if (taken.found) CountFreed(taken.size);
}

void LeakboundHeapSetFrontEnd(const char* mode, const char* unavailable) {
  g_mode = mode;
  g_unavailable = unavailable;
}

__attribute__((constructor(101))) static void InitCore(void) {
  Table();
  if (pthread_key_create(&g_release_key, ReleaseThreadCounters) == 0) {
    atomic_store_explicit(&g_release_key_ready, 1, memory_order_release);
  }
}

/* ---- the public API (leakbound/watch/heap.h) ------------------------------------------- */

int leakbound_heap_active(void) { return g_unavailable == NULL && atomic_load(&g_table) != NULL; }

const char* leakbound_heap_state(void) {
  if (g_unavailable) return g_unavailable;
  if (atomic_load(&g_table) == NULL) return "unavailable: mmap of the allocation table failed";
  if (atomic_load(&g_degraded)) {
    return "active, degraded: some allocations could not be recorded (untracked_allocations)";
  }
  return "active";
}

const char* leakbound_heap_mode(void) { return g_mode; }

void leakbound_heap_read(leakbound_heap_stats* out) {
  memset(out, 0, sizeof *out);
  out->live_bytes = atomic_load(&g_live_bytes);
  out->peak_bytes = atomic_load(&g_peak_bytes);
  int used = atomic_load_explicit(&g_threads_used, memory_order_acquire);
  int64_t live_allocations = 0;
  for (int i = 0; i < used; ++i) {
    live_allocations += atomic_load_explicit(&g_threads[i].live_allocations, memory_order_relaxed);
    out->total_allocations +=
        atomic_load_explicit(&g_threads[i].total_allocations, memory_order_relaxed);
    out->total_bytes += atomic_load_explicit(&g_threads[i].total_bytes, memory_order_relaxed);
    out->untracked_allocations +=
        atomic_load_explicit(&g_threads[i].untracked_allocations, memory_order_relaxed);
  }
  out->live_allocations = live_allocations > 0 ? (uint64_t)live_allocations : 0;
  if (out->peak_bytes < out->live_bytes) out->peak_bytes = out->live_bytes;
}

void leakbound_heap_reset_peak(void) { atomic_store(&g_peak_bytes, atomic_load(&g_live_bytes)); }

void leakbound_heap_exclude_begin(void) { ++t_exclude_depth; }

void leakbound_heap_exclude_end(void) {
  if (t_exclude_depth > 0) --t_exclude_depth;
}

int leakbound_heap_excluded(void) { return t_exclude_depth > 0; }

void leakbound_heap_set_counting(int on) { atomic_store(&g_paused, on ? 0 : 1); }

int leakbound_heap_counting(void) { return !atomic_load(&g_paused); }
