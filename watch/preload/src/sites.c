/* Call sites of the `leakbound watch` preload: a lock-free open-addressing table from the return
 * address of an allocation call to its survivors (bytes and count still live). The hook claims
 * a slot with one CAS the first time a call site allocates and then adds with relaxed atomics;
 * the marker reads the table at step ends and reports only what changed. For the sites whose
 * survivors keep growing (at LEAKBOUND_WATCH_FRAMES_AFTER markers) the marker asks for their
 * callers and samples (samples.c) and gives them a census by birth block of their own (below). */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "heap_core.h"
#include "leakbound/watch/heap.h"
#include "sites_internal.h"

/* The census of a site by birth (channel.h, LEAKBOUND_WATCH_SITE_CENSUS): for each cohort of the
 * heap's census, the bytes and blocks the site allocated in it and those of them freed since,
 * from the cohort after the marker asked for the site's callers (what it allocated before is not
 * booked: its cohorts are unknown, not empty). A cohort is the record's birth stamp, so a block
 * is booked born and freed in one cohort. Each thread books into a CensusDelta of its own (below);
 * these shared figures take what the entries fold, the frees of blocks of another cohort than
 * the thread's entry holds, and the shared counter slot's books (locked adds). */
typedef struct SiteCohort {
  _Atomic int64_t born_bytes;
  _Atomic int64_t born_blocks;
  _Atomic int64_t freed_bytes;
  _Atomic int64_t freed_blocks;
} SiteCohort;
typedef struct SiteCensus {
  uint64_t epoch;      /* g_census_epoch when it was given: the threads' entries it owns */
  unsigned generation; /* the heap census generation it books (a stamp's bits 8..15) */
  unsigned first;      /* its first cohort */
  uint32_t site;
  SiteCohort cohorts[LEAKBOUND_HEAP_COHORTS];
} SiteCensus;
static SiteCensus g_site_census[LEAKBOUND_WATCH_SITE_CENSUSES]; /* 8 KiB each, touched when used */
static uint32_t g_site_census_used; /* the marker's (under its lock) */
static uint64_t g_census_epoch = 1;  /* moves when the censuses are forgotten (a fork, a restart) */

/* Per-thread census books (4 threads allocating at one site with a census cost 4.6-7.7x bare
 * with the locked adds above, against 1.9x with none): each of the heap core's counter slots
 * has an entry per census holding one cohort, the one its thread last allocated in, with what
 * the thread booked born and freed there since (the owner's plain loads and stores). A birth in
 * another cohort folds the entry into the census first; a free of a block of another cohort
 * goes to the census's shared figures. key: (epoch << 8 | cohort) of what it holds, 0: being
 * folded (an epoch is never 0). The marker sums the census's figures and every entry of the
 * census's epoch (LeakboundSitesCensus): exact whenever the threads are quiet. */
typedef struct CensusDelta {
  _Atomic uint64_t key;
  _Atomic int64_t born_bytes;
  _Atomic int64_t born_blocks;
  _Atomic int64_t freed_bytes;
  _Atomic int64_t freed_blocks;
} CensusDelta;
static CensusDelta g_census_deltas[LEAKBOUND_HEAP_SLOTS][LEAKBOUND_WATCH_SITE_CENSUSES];

LB_HIDDEN int g_leakbound_sites_on = 0;
LB_HIDDEN int g_leakbound_sites_wanted = 0;
LB_HIDDEN Site g_sites[kSiteSlots];
LB_HIDDEN SiteCold g_cold[kSiteSlots];
LB_HIDDEN _Atomic int g_sites_waiting;
/* The claimed slots (slot + 1; 0: being written), in the order they were claimed: the marker
 * walks these, not the 65,535 slots (it did at every step: 11% of the malloc loop's time). */
static _Atomic uint32_t g_claimed[kSiteSlots];
static _Atomic uint32_t g_claimed_count;

/* Per-thread books (issue: call sites cost 26 ns per malloc/free pair, two locked adds on the
 * site's line each way). Each of the heap core's counter slots (one per thread) has a small
 * direct-mapped table of what its thread added to a site's bytes and allocations since the
 * entry was last folded into the site (when another site took the entry): the owner's plain
 * loads and stores, as the core's counters. A site's survivors are its own figures plus every
 * slot's entry for it, summed by the marker: exact whenever the threads are quiet (a thread
 * folding an entry in that instant is counted once too few, until the next marker). The shared
 * slot (past 1,023 threads) adds to the site with atomics. */
enum { kDeltaBits = 9 }; /* 512 entries a thread, 16 KiB */
typedef struct SiteDelta {
  _Atomic uint32_t site; /* 1-based; 0: empty */
  _Atomic int64_t bytes;
  _Atomic int64_t allocations;
} __attribute__((aligned(32))) SiteDelta; /* 32 bytes: an entry's place is a shift, not a multiply */
static SiteDelta g_deltas[LEAKBOUND_HEAP_SLOTS][1 << kDeltaBits];
/* Which of a slot's entries were ever claimed (set by Claim, never cleared: an entry holds a site
 * from its first claim on), so that a visit reads those, not all 512 of every slot: the malloc
 * loop with call sites read 512 entries and their copies at each step for its one site (2.7% of
 * its time in the marker, perf). Written in Claim only (the hooks' slow path: one locked or per
 * entry, at its first claim). */
_Static_assert(kDeltaBits >= 6, "g_delta_used: 64 entries a word");
enum { kDeltaWords = (1 << kDeltaBits) / 64 };
static _Atomic uint64_t g_delta_used[LEAKBOUND_HEAP_SLOTS][kDeltaWords];

/* What changed since the last visit, so that a marker visits those sites only (it walked every
 * claimed site: ~100 us a step in a PyTorch run with thousands of sites). A site's figures move
 * only when one of its entries does, when an entry is folded into it, or on the shared slot.
 * The marker keeps a copy of every entry as it last saw it; each thread writes the sites whose
 * entry it folds into a ring (the owner's stores, read by the marker, which falls back to a
 * visit of every site when a ring was lapped); adds on the shared slot are counted, and any
 * makes the next visit a full one. */
enum { kFoldRing = 512 };
typedef struct FoldRing {
  _Atomic uint64_t count;
  _Atomic uint32_t sites[kFoldRing];
} FoldRing;
static FoldRing g_folds[LEAKBOUND_HEAP_SLOTS];
static _Atomic uint64_t g_shared_books;
/* The marker's own (under its lock). */
typedef struct SeenDelta {
  uint32_t site;
  int64_t bytes;
  int64_t allocations;
} SeenDelta;
static SeenDelta g_seen[LEAKBOUND_HEAP_SLOTS][1 << kDeltaBits];
static uint64_t g_folds_read[LEAKBOUND_HEAP_SLOTS];
static uint64_t g_shared_books_seen;
static int g_full_visit = 1;
static uint32_t g_visits;
static uint32_t g_listed_at[kSiteSlots]; /* the visit that listed the site */
static uint32_t g_changed[kSiteSlots];
static uint32_t g_changed_count;
static uint32_t g_named_upto; /* g_claimed[0, named_upto) were listed once */
/* Sites asked for callers or samples (kFramesWanted, kSampling): a site enters only through a
 * visit (the marker asks), so the list is rechecked, not rebuilt. */
static uint32_t g_waiting_list[kSiteSlots];
static uint32_t g_waiting_count;
static uint8_t g_in_waiting[kSiteSlots];
static _Atomic uint64_t g_sites_dropped;

int LeakboundSiteFramesDue(uint32_t site, int may_ask) {
  if (site == 0 || site > kSiteSlots) return 0;
  SiteCold* s = &g_cold[site - 1];
  _Atomic int* state = &g_sites[site - 1].frames_state;
  if (s->frames_sent || s->grew < LEAKBOUND_WATCH_FRAMES_AFTER) return 0;
  /* Not asked yet and not to be asked now: nothing is given (no samples, no census), so the
   * site's allocations stay on the hooks' quiet path. */
  if (!may_ask && !s->census_asked) return 0;
  if (atomic_load_explicit(&s->samples, memory_order_relaxed) == 0) {
    const uint32_t samples = LeakboundSamplesTake();
    if (samples == 0) return 0; /* the pool is spent (or unmapped): never asked */
    /* Release: the chunk's pointer before the index (SamplesOf reads them in that order). */
    atomic_store_explicit(&s->samples, samples, memory_order_release);
  }
  if (!s->census_asked) {
    s->census_asked = 1;
    if (g_site_census_used < LEAKBOUND_WATCH_SITE_CENSUSES) {
      SiteCensus* census = &g_site_census[g_site_census_used++];
      const unsigned now = LeakboundHeapEpochNow();
      census->epoch = g_census_epoch;
      census->generation = (now >> 8) & 0xff;
      census->first = (now & 0xff) + 1; /* the current cohort began before: its births are lost */
      census->site = site;
      /* Before the cohort moves (the marker's census point, later under the same lock): a thread
       * that allocates in the first cohort sees the census (LeakboundSiteAlloc's fence). */
      atomic_store_explicit(&g_sites[site - 1].census, g_site_census_used, memory_order_release);
    }
  }
  int none = kFramesNone;
  atomic_compare_exchange_strong(state, &none, kFramesWanted); /* ask once */
  if (atomic_load_explicit(state, memory_order_acquire) < kSampling) return 0;
  s->frames_sent = 1;
  return 1;
}

/* Probes kSiteProbe slots of [base, base + size) from base + start for pc: its site, or 0 when
 * none of them is pc's or free. */
static inline uint32_t Probe(uintptr_t pc, size_t base, size_t size, size_t start) {
  size_t at = start;
  for (int probe = 0; probe < kSiteProbe; ++probe, at = at + 1 == size ? 0 : at + 1) {
    const size_t slot = base + at;
    uintptr_t seen = atomic_load_explicit(&g_sites[slot].pc, memory_order_relaxed);
    if (seen == pc) return (uint32_t)slot + 1;
    if (seen == 0 && atomic_compare_exchange_strong_explicit(&g_sites[slot].pc, &seen, pc,
                                                             memory_order_relaxed,
                                                             memory_order_relaxed)) {
      const uint32_t at = atomic_fetch_add_explicit(&g_claimed_count, 1, memory_order_relaxed);
      atomic_store_explicit(&g_claimed[at], (uint32_t)slot + 1, memory_order_release);
      return (uint32_t)slot + 1;
    }
    if (seen == pc) return (uint32_t)slot + 1; /* another thread claimed it for the same pc */
  }
  return 0;
}

/* Past the hot part: the rest of the table but its last slot, then the overflow site. */
static __attribute__((noinline, cold)) uint32_t SiteForOverflow(uintptr_t pc, uint64_t hash) {
  const size_t size = kSiteSlots - ((size_t)1 << kSiteBits) - 1;
  const uint32_t site = Probe(pc, (size_t)1 << kSiteBits, size, (size_t)(hash % size));
  if (site != 0) return site;
  atomic_fetch_add_explicit(&g_sites_dropped, 1, memory_order_relaxed);
  Site* overflow = &g_sites[kOverflowSite - 1];
  uintptr_t seen = atomic_load_explicit(&overflow->pc, memory_order_relaxed);
  if (seen == 0 && atomic_compare_exchange_strong_explicit(&overflow->pc, &seen,
                                                           LEAKBOUND_OVERFLOW_PC,
                                                           memory_order_relaxed,
                                                           memory_order_relaxed)) {
    const uint32_t at = atomic_fetch_add_explicit(&g_claimed_count, 1, memory_order_relaxed);
    atomic_store_explicit(&g_claimed[at], kOverflowSite, memory_order_release);
  }
  return kOverflowSite;
}



uint32_t LeakboundSiteFor(uintptr_t pc) {
  const uint64_t hash = (uint64_t)pc * 0x9E3779B97F4A7C15ull;
  const uint32_t site = Probe(pc, 0, (size_t)1 << kSiteBits, (size_t)(hash >> (64 - kSiteBits)));
  return __builtin_expect(site != 0, 1) ? site : SiteForOverflow(pc, hash);
}

static inline int64_t LoadRelaxed(_Atomic int64_t* field) {
  return atomic_load_explicit(field, memory_order_relaxed);
}

/* Takes a thread's delta entry for site: the site it held is folded into its books first. Out of
 * line (LTO inlined it into every hook, whose frame then saved every register). */
static __attribute__((noinline)) void Claim(SiteDelta* d, uint32_t slot, uint32_t site) {
  const uint32_t held = atomic_load_explicit(&d->site, memory_order_relaxed);
  if (held != 0) { /* fold the other site's entry into it */
    atomic_store_explicit(&d->site, 0, memory_order_relaxed);
    Site* other = &g_sites[held - 1];
    atomic_fetch_add_explicit(&other->bytes, LoadRelaxed(&d->bytes), memory_order_relaxed);
    atomic_fetch_add_explicit(&other->allocations, LoadRelaxed(&d->allocations),
                              memory_order_relaxed);
    FoldRing* ring = &g_folds[slot - 1];
    const uint64_t n = atomic_load_explicit(&ring->count, memory_order_relaxed);
    atomic_store_explicit(&ring->sites[n % kFoldRing], held, memory_order_relaxed);
    atomic_store_explicit(&ring->count, n + 1, memory_order_release);
  }
  atomic_store_explicit(&d->bytes, 0, memory_order_relaxed);
  atomic_store_explicit(&d->allocations, 0, memory_order_relaxed);
  atomic_store_explicit(&d->site, site, memory_order_relaxed);
  if (held == 0) {
    const size_t e = (size_t)(d - g_deltas[slot - 1]);
    atomic_fetch_or_explicit(&g_delta_used[slot - 1][e / 64], 1ull << (e % 64),
                             memory_order_release);
  }
}

/* The owner's add, as the heap core's (heap_core.h). */
static inline void AddRelaxed(_Atomic int64_t* field, int64_t by) { LeakboundOwnerAdd(field, by); }

/* Adds to site's books on the thread of core slot `slot` (LeakboundHeapOnAllocAt's value). */
static inline void Book(uint32_t slot, uint32_t site, int64_t bytes, int64_t count) {
  if (__builtin_expect(slot <= 1 || slot > LEAKBOUND_HEAP_SLOTS, 0)) {
    Site* s = &g_sites[site - 1];
    atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->allocations, count, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_shared_books, 1, memory_order_release);
    return;
  }
  SiteDelta* d = &g_deltas[slot - 1][site & ((1u << kDeltaBits) - 1)];
  if (__builtin_expect(atomic_load_explicit(&d->site, memory_order_relaxed) != site, 0)) {
    Claim(d, slot, site);
  }
  AddRelaxed(&d->bytes, bytes);
  AddRelaxed(&d->allocations, count);
}


/* Moves a thread's census entry to key: what it held goes into its census first (when the entry
 * is of that census's epoch: an entry of a census since forgotten is the parent's, or an earlier
 * series'). The marker skips the entry while its key is 0, and reads births (the shared figures,
 * then the entries) before frees (the entries, then the shared figures): so the frees go into the
 * census before the key is 0 (a marker that then misses them in the entry finds them in the
 * shared figures; one that reads both counts them twice, which hides a survivor, never adds one),
 * and the births after it (a marker that sees them in the shared figures sees key 0 after). */
static __attribute__((noinline)) void CensusRetag(CensusDelta* d, SiteCensus* c, uint64_t key) {
  const uint64_t held = atomic_load_explicit(&d->key, memory_order_relaxed);
  SiteCohort* k = held != 0 && (held >> 8) == c->epoch ? &c->cohorts[held & 0xff] : NULL;
  if (k) {
    atomic_fetch_add_explicit(&k->freed_bytes, LoadRelaxed(&d->freed_bytes), memory_order_relaxed);
    atomic_fetch_add_explicit(&k->freed_blocks, LoadRelaxed(&d->freed_blocks),
                              memory_order_relaxed);
  }
  atomic_store_explicit(&d->key, 0, memory_order_release); /* after the frees' adds */
  atomic_thread_fence(memory_order_release);               /* before the births' adds */
  if (k) {
    atomic_fetch_add_explicit(&k->born_bytes, LoadRelaxed(&d->born_bytes), memory_order_relaxed);
    atomic_fetch_add_explicit(&k->born_blocks, LoadRelaxed(&d->born_blocks), memory_order_relaxed);
  }
  atomic_store_explicit(&d->born_bytes, 0, memory_order_relaxed);
  atomic_store_explicit(&d->born_blocks, 0, memory_order_relaxed);
  atomic_store_explicit(&d->freed_bytes, 0, memory_order_relaxed);
  atomic_store_explicit(&d->freed_blocks, 0, memory_order_relaxed);
  atomic_store_explicit(&d->key, key, memory_order_release); /* its zeros before its key */
}

/* Books a block born (or freed) at a site with a census, in the cohort of its birth stamp, on
 * the thread of core slot `slot`. */
/* The key of the entry a block stamped `stamp` is booked under in census c; 0 when the census
 * books nothing of it (born before the census began, in an earlier generation (a fork's parent),
 * or past the last cohort). Never 0 otherwise: an epoch is never 0. */
static inline uint64_t CensusKey(const SiteCensus* c, unsigned stamp) {
  const unsigned cohort = stamp & 0xff;
  if (((stamp >> 8) & 0xff) != c->generation || cohort < c->first ||
      cohort >= LEAKBOUND_HEAP_COHORTS) {
    return 0;
  }
  return (c->epoch << 8) | cohort;
}

static __attribute__((noinline)) void CensusBook(uint32_t slot, uint32_t census, unsigned stamp,
                                                 int64_t bytes, int64_t blocks, int born) {
  SiteCensus* c = &g_site_census[census - 1];
  const uint64_t key = CensusKey(c, stamp);
  if (key == 0) return;
  const unsigned cohort = (unsigned)(key & 0xff);
  CensusDelta* d = slot > 1 && slot <= LEAKBOUND_HEAP_SLOTS
                       ? &g_census_deltas[slot - 1][census - 1]
                       : NULL;
  if (d && atomic_load_explicit(&d->key, memory_order_relaxed) != key && born) {
    CensusRetag(d, c, key);
  }
  if (d && atomic_load_explicit(&d->key, memory_order_relaxed) == key) {
    AddRelaxed(born ? &d->born_bytes : &d->freed_bytes, bytes);
    AddRelaxed(born ? &d->born_blocks : &d->freed_blocks, blocks);
    return;
  }
  SiteCohort* k = &c->cohorts[cohort]; /* the shared slot, or a free of another cohort's block */
  if (born) {
    atomic_fetch_add_explicit(&k->born_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->born_blocks, blocks, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&k->freed_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&k->freed_blocks, blocks, memory_order_relaxed);
  }
}

__attribute__((noinline)) void LeakboundSiteAlloc(uint32_t site, uint32_t slot, void* block,
                                                  int64_t bytes, unsigned stamp, uintptr_t pc) {
  if (site == 0 || site > kSiteSlots) return;
  Book(slot, site, bytes, 1);
  Site* s = &g_sites[site - 1];
  /* The core read the census clock (relaxed) for the stamp: a block stamped in a site's first
   * cohort comes after the clock moved there, which the marker did after giving the census. The
   * census's fields were written before it was published (acquire). */
  atomic_thread_fence(memory_order_acquire);
  const uint32_t census = atomic_load_explicit(&s->census, memory_order_acquire);
  if (__builtin_expect(census != 0, 0)) CensusBook(slot, census, stamp, bytes, 1, 1);
  const int state = atomic_load_explicit(&s->frames_state, memory_order_relaxed);
  if (__builtin_expect(LeakboundSiteTakes(state), 0)) {
    /* The overflow site's samples are of the allocation's own pc; any other site's, its pc. */
    if (site != kOverflowSite) pc = atomic_load_explicit(&s->pc, memory_order_relaxed);
    LeakboundSampleSlow(site - 1, pc, block, state);
  }
}

__attribute__((noinline)) void LeakboundSiteFree(uint32_t site, uint32_t slot, void* block,
                                                 int64_t bytes, unsigned stamp) {
  if (site == 0 || site > kSiteSlots) return;
  Book(slot, site, -bytes, -1);
  Site* s = &g_sites[site - 1];
  /* A block in a census cohort was born after the census began (LeakboundSiteAlloc). */
  const uint32_t census = atomic_load_explicit(&s->census, memory_order_acquire);
  if (__builtin_expect(census != 0, 0)) CensusBook(slot, census, stamp, bytes, 1, 0);
  const int state = atomic_load_explicit(&s->frames_state, memory_order_relaxed);
  if (__builtin_expect(LeakboundSiteHolds(state), 0)) LeakboundSampleFreed(site - 1, block);
}

/* The common paths of a heap block's site books (LeakboundSiteAlloc / Free otherwise), all checked
 * before anything is written: the thread's entry holds the site; the site is not taking callers
 * or samples from this block (alloc: not LeakboundSiteTakes; free: not LeakboundSiteHolds); and when it has a census, the block needs none of its entries (born before it
 * began, in another generation, past the last cohort) or the thread's census entry holds the
 * block's cohort (CensusBook's own common case). slot: a slot of the thread's own (>= 2), as the
 * core's fast paths give it. A quiet site (no census, no callers or samples asked) is checked
 * inline in the hooks; one with a census or a state goes through SiteBooked, out of line, so
 * that the hooks' frames keep few registers. */
/* frames_state and census side by side, read as one word (x86-64: one load, one test). */
typedef uint64_t __attribute__((may_alias)) SiteQuietWord;
_Static_assert(offsetof(Site, census) == offsetof(Site, frames_state) + 4 &&
                   offsetof(Site, frames_state) % 8 == 0 && sizeof(int) == 4,
               "SiteQuiet reads frames_state and census as one aligned word");
static inline int SiteQuiet(const Site* s) {
  /* Before the census's load, as LeakboundSiteAlloc's fence. */
  atomic_thread_fence(memory_order_acquire);
#if defined(__x86_64__)
  /* Both 4-byte fields in one 8-byte load: each half is read whole (x86-64 loads an aligned word
   * at once), which is all the two separate loads promised. */
  return __atomic_load_n((const SiteQuietWord*)(const void*)&s->frames_state, __ATOMIC_ACQUIRE) ==
         0;
#else
  return (atomic_load_explicit(&s->census, memory_order_acquire) |
          (uint32_t)atomic_load_explicit(&s->frames_state, memory_order_relaxed)) == 0;
#endif
}

/* A site with a census or a state: books what the common path can (1), else nothing (0). */
static inline int SiteBooked(SiteDelta* d, const Site* s, uint32_t slot,
                             unsigned stamp, int64_t bytes, int born) {
  atomic_thread_fence(memory_order_acquire);
  const uint32_t census = atomic_load_explicit(&s->census, memory_order_acquire);
  const int state = atomic_load_explicit(&s->frames_state, memory_order_relaxed);
  if (born ? LeakboundSiteTakes(state) : LeakboundSiteHolds(state)) {
    return 0;
  }
  CensusDelta* entry = NULL;
  const uint64_t key = census != 0 ? CensusKey(&g_site_census[census - 1], stamp) : 0;
  if (key != 0) { /* else CensusBook books nothing */
    entry = &g_census_deltas[slot - 1][census - 1];
    if (atomic_load_explicit(&entry->key, memory_order_relaxed) != key) return 0;
  }
  AddRelaxed(&d->bytes, born ? bytes : -bytes);
  AddRelaxed(&d->allocations, born ? 1 : -1);
  if (entry) {
    AddRelaxed(born ? &entry->born_bytes : &entry->freed_bytes, bytes);
    AddRelaxed(born ? &entry->born_blocks : &entry->freed_blocks, 1);
  }
  return 1;
}

/* The hooks' way past a site that is not quiet, or whose entry the thread does not hold: what
 * SiteBooked can book, else the general path. Takes what LeakboundSiteAlloc / Free take, so that
 * no value of the hook's lives across the call. */
static __attribute__((noinline)) void SiteAllocBusy(uint32_t site, uint32_t slot, void* block,
                                                    int64_t bytes, unsigned stamp, uintptr_t pc) {
  SiteDelta* d = &g_deltas[slot - 1][site & ((1u << kDeltaBits) - 1)];
  if (atomic_load_explicit(&d->site, memory_order_relaxed) != site ||
      !SiteBooked(d, &g_sites[site - 1], slot, stamp, bytes, 1)) {
    LeakboundSiteAlloc(site, slot, block, bytes, stamp, pc);
  }
}

static __attribute__((noinline)) void SiteFreeBusy(uint32_t site, uint32_t slot, void* block,
                                                   int64_t bytes, unsigned stamp) {
  SiteDelta* d = &g_deltas[slot - 1][site & ((1u << kDeltaBits) - 1)];
  if (atomic_load_explicit(&d->site, memory_order_relaxed) != site ||
      !SiteBooked(d, &g_sites[site - 1], slot, stamp, bytes, 0)) {
    LeakboundSiteFree(site, slot, block, bytes, stamp);
  }
}

/* A block's site books on the common path (slot: the core's; bytes and blocks: + when born, -
 * when freed): 1 when booked, 0 when nothing was done (the site is not quiet, or the thread's
 * entry is another's: SiteAllocBusy / SiteFreeBusy book it). */
static inline int SiteBookedQuiet(uint32_t site, uint32_t slot, int64_t bytes, int64_t blocks) {
  SiteDelta* d = &g_deltas[slot - 1][site & ((1u << kDeltaBits) - 1)];
  if (__builtin_expect(atomic_load_explicit(&d->site, memory_order_relaxed) != site ||
                           !SiteQuiet(&g_sites[site - 1]), 0)) {
    return 0;
  }
  AddRelaxed(&d->bytes, bytes);
  AddRelaxed(&d->allocations, blocks);
  return 1;
}

int LeakboundSiteCountedFast(void* block, uint64_t size, uintptr_t pc, int in_hold) {
  /* The site's first probe only (the table's other slots: LeakboundSiteFor). */
  const size_t at = (size_t)(((uint64_t)pc * 0x9E3779B97F4A7C15ull) >> (64 - kSiteBits));
  if (__builtin_expect(atomic_load_explicit(&g_sites[at].pc, memory_order_relaxed) != pc, 0)) {
    return 0;
  }
  const uint32_t site = (uint32_t)at + 1;
  unsigned stamp;
  int slot;
  if (__builtin_expect(!(in_hold ? LeakboundHeapOnAllocFastInHold(block, size, site, &stamp, &slot)
                                 : LeakboundHeapOnAllocFast(block, size, site, &stamp, &slot)),
                       0)) {
    return 0;
  }
  if (__builtin_expect(!SiteBookedQuiet(site, (uint32_t)slot, (int64_t)size, 1), 0)) {
    SiteAllocBusy(site, (uint32_t)slot, block, (int64_t)size, stamp, pc);
  }
  return 1;
}

/* SiteAllocBusy, then the block back to the caller: the allocation hooks' common path reaches it
 * by a tail call. Keeps its frame pointer: with the hook's return address just above it (a tail
 * call leaves the caller's in place), the stack scan finds the allocating call's slot. */
static __attribute__((noinline)) void* SiteAllocBusyReturning(uint32_t site, uint32_t slot,
                                                              void* block, int64_t bytes,
                                                              unsigned stamp, uintptr_t pc) {
  SiteAllocBusy(site, slot, block, bytes, stamp, pc);
  LeakboundJobClockCheck(); /* the held path's test (nothing to do on the common path) */
  return block;
}

/* SiteAllocBlock while the job's clock holds the core's fast paths (a process that marks
 * no step yet: a PyTorch program's whole import): the same past the hold, then the clock's test;
 * else the general path. */
static __attribute__((noinline, flatten)) LB_HOOK_FRAMELESS void* SiteAllocHeld(void* block,
                                                                               uint64_t size,
                                                                               uintptr_t pc,
                                                                               uint32_t site) {
  unsigned stamp;
  int slot;
  if (!LeakboundHeapOnAllocFastInHold(block, size, site, &stamp, &slot)) {
    return LeakboundAllocGeneral(block, size, pc);
  }
  if (__builtin_expect(!SiteBookedQuiet(site, (uint32_t)slot, (int64_t)size, 1), 0)) {
    return SiteAllocBusyReturning(site, (uint32_t)slot, block, (int64_t)size, stamp, pc);
  }
  return LeakboundJobClockMoved() ? LeakboundJobClockSampleReturning(block) : block;
}

/* No frame pointer, and nothing but tail calls: see LeakboundSiteMalloc's declaration. */
static inline __attribute__((always_inline)) void* SiteAllocBlock(void* block, uint64_t size,
                                                                  uintptr_t pc) {
  /* The site's first probe only (the table's other slots: LeakboundSiteFor). */
  const size_t at = (size_t)(((uint64_t)pc * 0x9E3779B97F4A7C15ull) >> (64 - kSiteBits));
  if (__builtin_expect(atomic_load_explicit(&g_sites[at].pc, memory_order_relaxed) != pc, 0)) {
    return LeakboundAllocGeneral(block, size, pc);
  }
  const uint32_t site = (uint32_t)at + 1;
  unsigned stamp;
  int slot;
  if (__builtin_expect(!LeakboundHeapOnAllocFast(block, size, site, &stamp, &slot), 0)) {
    return SiteAllocHeld(block, size, pc, site);
  }
  if (__builtin_expect(!SiteBookedQuiet(site, (uint32_t)slot, (int64_t)size, 1), 0)) {
    return SiteAllocBusyReturning(site, (uint32_t)slot, block, (int64_t)size, stamp, pc);
  }
  return block;
}

/* malloc jumped here, so the return address is its caller's (read after glibc's malloc, from the
 * stack, where it stays: no register keeps it across the call). */
__attribute__((noinline, flatten)) LB_HOOK_FRAMELESS void* LeakboundSiteMalloc(size_t size) {
  void* block = __libc_malloc(size);
  if (__builtin_expect(block == NULL, 0)) return NULL;
  return SiteAllocBlock(
      block, size, (uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0)));
}

__attribute__((noinline, flatten)) LB_HOOK_FRAMELESS void* LeakboundSiteNew(size_t size) {
  const size_t bytes = size + (size == 0);
  void* block = __libc_malloc(bytes);
  if (__builtin_expect(block == NULL, 0)) return LeakboundNewFailed(bytes);
  return SiteAllocBlock(
      block, bytes, (uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0)));
}

int LeakboundSiteUncountedFast(void* block) {
  LeakboundHeapTaken taken;
  const int took = LeakboundHeapOnFreeFast(block, &taken);
  if (took <= 0) return took + 1;
  const uint32_t site = taken.site;
  if (site == 0 || site > kSiteSlots) return 1;
  if (__builtin_expect(!SiteBookedQuiet(site, taken.slot, -(int64_t)taken.size, -1), 0)) {
    SiteFreeBusy(site, taken.slot, block, (int64_t)taken.size, taken.epoch);
  }
  return 1;
}

/* SiteFreeBusy, then the block goes back to glibc: the free hook's common path reaches it by a
 * tail call, so it keeps no frame. */
static __attribute__((noinline)) void SiteFreeBusyThenFree(uint32_t site, uint32_t slot,
                                                           void* block, int64_t bytes,
                                                           unsigned stamp) {
  SiteFreeBusy(site, slot, block, bytes, stamp);
  __libc_free(block);
}

__attribute__((noinline, flatten)) LB_HOOK_FRAMELESS void LeakboundSiteFreeBlock(void* block) {
  LeakboundHeapTaken taken;
  const int took = LeakboundHeapOnFreeFast(block, &taken);
  if (__builtin_expect(took < 0, 0)) {
    LeakboundFreeGeneral(block);
    return;
  }
  const uint32_t site = taken.site;
  if (took > 0 && site != 0 && site <= kSiteSlots &&
      __builtin_expect(!SiteBookedQuiet(site, taken.slot, -(int64_t)taken.size, -1), 0)) {
    SiteFreeBusyThenFree(site, taken.slot, block, (int64_t)taken.size, taken.epoch);
    return;
  }
  __libc_free(block);
}

void LeakboundSiteMapped(uint32_t site, uintptr_t start, int64_t bytes, int64_t blocks,
                         unsigned stamp, int role) {
  if (site == 0 || site > kSiteSlots || (bytes == 0 && blocks == 0)) return;
  atomic_store_explicit(&g_cold[site - 1].role, (uint8_t)role, memory_order_relaxed);
  Book(0, site, bytes, blocks); /* the shared slot: mappings are few, and any thread unmaps */
  Site* s = &g_sites[site - 1];
  const uint32_t census = atomic_load_explicit(&s->census, memory_order_acquire);
  const int born = bytes > 0 || blocks > 0;
  if (census != 0) {
    CensusBook(0, census, stamp, born ? bytes : -bytes, born ? blocks : -blocks, born);
  }
  const int state = atomic_load_explicit(&s->frames_state, memory_order_relaxed);
  /* The overflow site samples heap blocks only: a mapping's own pc is not known here (an mremap
   * books the mapping it moves anew). */
  if (bytes > 0 && blocks > 0 && site != kOverflowSite &&
      LeakboundSiteTakes(state)) {
    LeakboundSampleSlow(site - 1, atomic_load_explicit(&s->pc, memory_order_relaxed), (void*)start,
                        state);
  } else if (!born && blocks < 0 && LeakboundSiteHolds(state)) {
    LeakboundSampleFreed(site - 1, (void*)start);
  }
}

uint32_t LeakboundOverflowSite(void) { return kOverflowSite; }

int LeakboundSiteRole(uint32_t site) {
  return site != 0 && site <= kSiteSlots
             ? atomic_load_explicit(&g_cold[site - 1].role, memory_order_relaxed)
             : 0;
}

static void List(uint32_t site) {
  if (site == 0 || site > kSiteSlots || g_listed_at[site - 1] == g_visits) return;
  g_listed_at[site - 1] = g_visits;
  g_changed[g_changed_count++] = site;
}

/* Lists the sites whose figures may have moved since the last visit (every claimed site on a
 * full visit); returns the number of thread slots to sum. */
static int ListChanged(void) {
  if (++g_visits == 0) { /* wrapped: no site may look listed */
    memset(g_listed_at, 0, sizeof g_listed_at);
    g_visits = 1;
  }
  g_changed_count = 0;
  const int slots = LeakboundHeapSlotsUsed();
  int full = g_full_visit;
  const uint64_t shared = atomic_load_explicit(&g_shared_books, memory_order_acquire);
  if (shared != g_shared_books_seen) full = 1;
  g_shared_books_seen = shared;
  for (int k = 1; k < slots && k < LEAKBOUND_HEAP_SLOTS; ++k) {
    FoldRing* ring = &g_folds[k];
    const uint64_t from = g_folds_read[k];
    const uint64_t to = atomic_load_explicit(&ring->count, memory_order_acquire);
    /* The owner writes entry n before it publishes count n + 1, so with kFoldRing entries
     * unread the next write may already be over the oldest: lapped from there on. */
    for (uint64_t f = to - from >= kFoldRing ? to : from; f < to; ++f) {
      List(atomic_load_explicit(&ring->sites[f % kFoldRing], memory_order_relaxed));
    }
    /* Lapped before or while it was read: some fold may be missing. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&ring->count, memory_order_relaxed) - from >= kFoldRing) full = 1;
    g_folds_read[k] = to;
    for (int w = 0; w < kDeltaWords; ++w) {
      /* An entry not yet marked used still holds nothing for this visit to miss: its claim
       * marks it after storing its site, and the next visit reads it. */
      for (uint64_t used = atomic_load_explicit(&g_delta_used[k][w], memory_order_acquire);
           used != 0; used &= used - 1) {
        const int e = w * 64 + __builtin_ctzll(used);
        SiteDelta* d = &g_deltas[k][e];
        SeenDelta* seen = &g_seen[k][e];
        const uint32_t site = atomic_load_explicit(&d->site, memory_order_relaxed);
        const int64_t bytes = LoadRelaxed(&d->bytes);
        const int64_t allocations = LoadRelaxed(&d->allocations);
        if (site == seen->site && bytes == seen->bytes && allocations == seen->allocations) {
          continue;
        }
        List(site);
        if (seen->site != site) List(seen->site); /* folded: in the ring too, unless lapped */
        seen->site = site;
        seen->bytes = bytes;
        seen->allocations = allocations;
      }
    }
  }
  const uint32_t claimed = atomic_load_explicit(&g_claimed_count, memory_order_acquire);
  uint32_t c = g_named_upto;
  for (; c < claimed && c < kSiteSlots; ++c) {
    const uint32_t id = atomic_load_explicit(&g_claimed[c], memory_order_acquire);
    if (id == 0) break; /* being claimed: the next visit has it */
    List(id);
  }
  g_named_upto = c;
  if (full) {
    for (c = 0; c < g_named_upto; ++c) List(atomic_load_explicit(&g_claimed[c], memory_order_relaxed));
    g_full_visit = 0;
  }
  return slots;
}

void LeakboundSitesVisitChanged(LeakboundSiteVisitor visit, void* context) {
  const int slots = ListChanged();
  for (uint32_t j = 0; j < g_changed_count; ++j) {
    const uint32_t i = g_changed[j] - 1;
    Site* hot = &g_sites[i];
    SiteCold* s = &g_cold[i];
    uintptr_t pc = atomic_load_explicit(&hot->pc, memory_order_relaxed);
    if (pc == 0) continue; /* a slot no site claimed (never listed, but cheap to be sure) */
    int64_t bytes = LoadRelaxed(&hot->bytes);
    int64_t allocations = LoadRelaxed(&hot->allocations);
    const uint32_t e = (i + 1) & ((1u << kDeltaBits) - 1);
    for (int k = 1; k < slots && k < LEAKBOUND_HEAP_SLOTS; ++k) {
      SiteDelta* d = &g_deltas[k][e];
      if (atomic_load_explicit(&d->site, memory_order_relaxed) != i + 1) continue;
      bytes += LoadRelaxed(&d->bytes);
      allocations += LoadRelaxed(&d->allocations);
    }
    if (!s->named || bytes != s->sent_bytes || (uint32_t)allocations != s->sent_allocations) {
      if (s->named && bytes > s->sent_bytes && s->grew < UINT8_MAX) ++s->grew;
      visit(i + 1, pc, bytes, allocations, !s->named, context);
      s->named = 1;
      s->sent_bytes = bytes;
      s->sent_allocations = (uint32_t)allocations;
    }
  }
  /* After the visits (they may ask): who waits now. */
  uint32_t kept = 0;
  for (uint32_t j = 0; j < g_waiting_count; ++j) {
    const uint32_t id = g_waiting_list[j];
    const int state = atomic_load_explicit(&g_sites[id - 1].frames_state, memory_order_relaxed);
    if (state == kFramesWanted || state == kSampling) {
      g_waiting_list[kept++] = id;
    } else {
      g_in_waiting[id - 1] = 0;
    }
  }
  g_waiting_count = kept;
  for (uint32_t j = 0; j < g_changed_count; ++j) {
    const uint32_t id = g_changed[j];
    const int state = atomic_load_explicit(&g_sites[id - 1].frames_state, memory_order_relaxed);
    if ((state == kFramesWanted || state == kSampling) && !g_in_waiting[id - 1]) {
      g_in_waiting[id - 1] = 1;
      g_waiting_list[g_waiting_count++] = id;
    }
  }
  atomic_store_explicit(&g_sites_waiting, (int)g_waiting_count, memory_order_relaxed);
}

/* A thread's entry of census c when it holds a cohort of c's epoch in [c->first, cohort_now]:
 * its cohort, else -1. */
static int EntryCohort(const CensusDelta* d, const SiteCensus* c, unsigned cohort_now) {
  const uint64_t key = atomic_load_explicit(&d->key, memory_order_acquire);
  const unsigned cohort = (unsigned)(key & 0xff);
  if (key == 0 || (key >> 8) != c->epoch || cohort < c->first || cohort > cohort_now ||
      cohort >= LEAKBOUND_HEAP_COHORTS) {
    return -1;
  }
  return (int)cohort;
}

/* Adds the births (born: 1) or subtracts the frees (0) of census i's entries in the threads'
 * books of slots [1, slots), cohort by cohort; an entry whose key moved while it was read is left
 * out. */
static void AddEntries(SiteCensus* c, uint32_t i, unsigned cohort_now, int slots, int born,
                       int64_t* bytes, int64_t* blocks) {
  for (int t = 1; t < slots && t < LEAKBOUND_HEAP_SLOTS; ++t) {
    CensusDelta* d = &g_census_deltas[t][i];
    const int k = EntryCohort(d, c, cohort_now);
    if (k < 0) continue;
    const int64_t b = LoadRelaxed(born ? &d->born_bytes : &d->freed_bytes);
    const int64_t n = LoadRelaxed(born ? &d->born_blocks : &d->freed_blocks);
    atomic_thread_fence(memory_order_acquire);
    if (EntryCohort(d, c, cohort_now) != k) continue;
    bytes[k] += born ? b : -b;
    blocks[k] += born ? n : -n;
  }
}

void LeakboundSitesCensus(unsigned cohort_now, LeakboundSiteCensusVisitor visit, void* context) {
  const int slots = LeakboundHeapSlotsUsed();
  for (uint32_t i = 0; i < g_site_census_used; ++i) {
    SiteCensus* c = &g_site_census[i];
    if (c->site == 0) continue; /* retired by a restart of the series */
    visit(c->site, LEAKBOUND_WATCH_SITE_CENSUS_FROM, c->first, 0, context);
    /* Every birth before any free: a block born and freed while this reads can hide a survivor,
     * never add one. Births: the shared figures, then the threads' entries (an entry folded in
     * between is missed, not counted twice); frees: the entries, then the shared figures (an
     * entry folded in between is counted there). */
    int64_t bytes[LEAKBOUND_HEAP_COHORTS] = {0}, blocks[LEAKBOUND_HEAP_COHORTS] = {0};
    for (unsigned k = c->first; k <= cohort_now && k < LEAKBOUND_HEAP_COHORTS; ++k) {
      bytes[k] = LoadRelaxed(&c->cohorts[k].born_bytes);
      blocks[k] = LoadRelaxed(&c->cohorts[k].born_blocks);
    }
    atomic_thread_fence(memory_order_acquire);
    AddEntries(c, i, cohort_now, slots, 1, bytes, blocks);
    atomic_thread_fence(memory_order_acquire);
    /* Slots again: a thread that began meanwhile may have freed a block counted born above. */
    AddEntries(c, i, cohort_now, LeakboundHeapSlotsUsed(), 0, bytes, blocks);
    atomic_thread_fence(memory_order_acquire);
    for (unsigned k = c->first; k <= cohort_now && k < LEAKBOUND_HEAP_COHORTS; ++k) {
      bytes[k] -= LoadRelaxed(&c->cohorts[k].freed_bytes);
      blocks[k] -= LoadRelaxed(&c->cohorts[k].freed_blocks);
      if (bytes[k] > 0 || blocks[k] > 0) {
        visit(c->site, k, bytes[k] > 0 ? bytes[k] : 0, blocks[k] > 0 ? blocks[k] : 0, context);
      }
    }
  }
}

uint64_t LeakboundSitesDropped(void) { return atomic_load(&g_sites_dropped); }

void LeakboundSitesForget(int forked_child) {
  /* The claimed sites only (the others hold nothing, and walking all would touch every page of
   * the table); one being claimed right now (0) starts afresh anyway. */
  const uint32_t claimed = atomic_load_explicit(&g_claimed_count, memory_order_acquire);
  for (uint32_t c = 0; c < claimed && c < kSiteSlots; ++c) {
    const uint32_t id = atomic_load_explicit(&g_claimed[c], memory_order_acquire);
    if (id == 0) continue;
    const uint32_t i = id - 1;
    g_cold[i].named = 0;
    g_cold[i].sent_bytes = 0;
    g_cold[i].sent_allocations = 0;
    g_cold[i].grew = 0;
    g_cold[i].frames_sent = 0;
    g_cold[i].visits_sampling = 0;
    g_cold[i].visits_full = 0;
    g_cold[i].census_asked = 0;
    atomic_store_explicit(&g_sites[i].census, 0, memory_order_relaxed);
    LeakboundSamplesForget(i, forked_child);
  }
  LeakboundSamplesForgetAll(forked_child);
  if (forked_child) LeakboundDeviceForget();
  atomic_store_explicit(&g_sites_waiting, 0, memory_order_relaxed);
  /* The censuses so far are of blocks of the old series (or the parent's): the sites get theirs
   * anew. In a forked child (one thread) their slots are given again; in a restart of the series
   * other threads may be booking into them right now, so they are only retired (a census's
   * fields are written once before it is published, and never again while threads run). */
  if (forked_child) {
    memset(g_site_census, 0, sizeof(SiteCensus) * g_site_census_used);
    g_site_census_used = 0;
  } else {
    for (uint32_t i = 0; i < g_site_census_used; ++i) g_site_census[i].site = 0;
  }
  ++g_census_epoch; /* the threads' entries of those censuses are dropped as they are met */
  /* The next visit sees every site again (each is named anew), and rebuilds who waits. */
  g_full_visit = 1;
  for (uint32_t w = 0; w < g_waiting_count; ++w) g_in_waiting[g_waiting_list[w] - 1] = 0;
  g_waiting_count = 0;
}

