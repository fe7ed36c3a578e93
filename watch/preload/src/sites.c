/* Call sites of the `leakbound watch` preload: a lock-free open-addressing table from the return
 * address of an allocation call to its survivors (bytes and count still live). The hook claims
 * a slot with one CAS the first time a call site allocates and then adds with relaxed atomics;
 * the marker reads the table at step ends and reports only what changed. For the sites whose
 * survivors keep growing (at LEAKBOUND_WATCH_FRAMES_AFTER markers) the marker asks for their
 * callers; the next allocation there takes them (backtrace, once per such site: never per
 * allocation, and not for the thousands of sites a program's start-up claims) and the next
 * LEAKBOUND_WATCH_SAMPLES allocations there are kept as samples: the block and the Python line
 * running at the time (leakbound_python_where). A free of a sampled block marks it dead, so the
 * marker can say which line the samples that survive came from: the line whose blocks stay,
 * not the one that happened to allocate first. */
#include <execinfo.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "heap_core.h"
#include "leakbound/watch/heap.h"
#include "preload_internal.h"

/* Call sites: 65,536 slots in two parts. A site's pc is hashed into the first 16,384 (the hot
 * part: a program's sites touch its pages only, as when that was the whole table); only when 64
 * probes there find no room does it go to the other 49,152 (pages touched only by a program
 * with that many sites; the arrays are zero bss, so untouched parts cost address space, not
 * memory). */
enum {
  kSiteBits = 14,            /* the hot part: 16,384 slots */
  kSiteSlots = 1 << 16,      /* the whole table */
  kSiteProbe = 64,
};

/* A site's callers and samples: asked by the marker, the callers taken by the next allocation,
 * then samples until LEAKBOUND_WATCH_SAMPLES were kept, then read by the marker (kReported: no
 * more bookkeeping on its frees). */
enum { kFramesNone, kFramesWanted, kFramesTaking, kSampling, kSampled, kReported };

/* What the hooks touch, 32 bytes a site (the probe walks these); the rest is in SiteCold. */
typedef struct Site {
  _Atomic uintptr_t pc;
  _Atomic int frames_state; /* kFrames*: asked by the marker, taken by the next allocation */
  _Atomic uint32_t census;  /* its SiteCensus + 1 (0: none) */
  _Atomic int64_t bytes;
  _Atomic int64_t allocations;
} Site;

/* The callers once taken and the samples of a site the marker asked about: in a pool, taken
 * when the marker first asks (most sites are never asked: 320 bytes each for all 16,384 sites
 * were ~5 MiB of a PyTorch run's resident memory). */
typedef struct SiteSamples {
  uintptr_t frames[LEAKBOUND_WATCH_FRAMES];
  int frame_count; /* written before frames_state becomes kSampling */
  int scanned_from; /* frames from this one on were found by a stack scan (stack_scan.c) */
  _Atomic int samples_claimed;
  void* _Atomic sample_block[LEAKBOUND_WATCH_SAMPLES]; /* NULL once freed */
  const char* sample_where[LEAKBOUND_WATCH_SAMPLES];   /* the Python line, or NULL */
} SiteSamples;
enum { kSampledSites = 4096 }; /* sites asked beyond these get no callers (their name stays) */
enum { kScannedFrames = 4 };   /* callers a stack scan may add past code of no module */

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

/* The reporting side's books. */
typedef struct SiteCold {
  _Atomic uint32_t samples; /* its SiteSamples + 1, set before the marker first asks; 0: none */
  int named;
  int grew; /* visits at which its survivors grew */
  int frames_sent;
  int python_sent;
  int visits_sampling; /* visits since the callers were taken */
  int visits_full;     /* visits since its last sample was kept */
  int census_asked;    /* a census was given it, or none was left */
  _Atomic int mapping; /* its allocations are anonymous mappings (mmap), not heap blocks */
  int64_t sent_bytes;
  int64_t sent_allocations;
} SiteCold;

LB_HIDDEN int g_leakbound_sites_on = 1;
static Site g_sites[kSiteSlots];
static SiteCold g_cold[kSiteSlots];
static SiteSamples g_samples[kSampledSites];
static uint32_t g_samples_used; /* the marker's (under its lock) */

/* A site's samples, or NULL when the marker never asked about it. */
static inline SiteSamples* SamplesOf(size_t slot) {
  const uint32_t at = atomic_load_explicit(&g_cold[slot].samples, memory_order_acquire);
  return at ? &g_samples[at - 1] : NULL;
}
/* The claimed slots (slot + 1; 0: being written), in the order they were claimed: the marker
 * walks these, not the 65,536 slots (it did at every step: 11% of the malloc loop's time). */
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
enum { kDeltaBits = 9 }; /* 512 entries a thread, 12 KiB */
typedef struct SiteDelta {
  _Atomic uint32_t site; /* 1-based; 0: empty */
  _Atomic int64_t bytes;
  _Atomic int64_t allocations;
} SiteDelta;
static SiteDelta g_deltas[LEAKBOUND_HEAP_SLOTS][1 << kDeltaBits];

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
static __thread int t_unwinding; /* backtrace may allocate: no capture inside a capture */
static _Atomic int g_unwinder_ready; /* sites claimed before the warm-up keep no callers */
/* Python attribution (leakbound_python_*): the line the thread's Python code runs, set by the
 * leakbound module's tracer while the marker wants samples. */
static __thread const char* t_python_where;
static _Atomic int g_python_tracer;   /* the module will trace: samples wait for its tracing */
static _Atomic int g_python_tracing;  /* its tracer runs: samples carry the line */
static _Atomic int g_sites_waiting;   /* sites asked for callers or samples, at the last visit */

void LeakboundSitesWarmUp(void) {
  void* frames[2];
  t_unwinding = 1;
  backtrace(frames, 2);
  t_unwinding = 0;
  atomic_store(&g_unwinder_ready, 1);
}

/* The callers of the allocation call at pc: what backtrace finds past the frame that returns to
 * pc (the hook's own frames come before it). */
static void Capture(SiteSamples* s, uintptr_t pc) {
  t_unwinding = 1;
  void* frames[LEAKBOUND_WATCH_FRAMES + 8];
  const int n = backtrace(frames, (int)(sizeof frames / sizeof frames[0]));
  t_unwinding = 0;
  int at = 0;
  while (at < n && (uintptr_t)frames[at] != pc) ++at;
  int kept = 0;
  for (int i = at + 1; i < n && kept < LEAKBOUND_WATCH_FRAMES; ++i) {
    s->frames[kept++] = (uintptr_t)frames[i];
  }
  s->scanned_from = kept;
  /* The unwinder stopped at pc, in code of no module: its callers from the stack. */
  if (at + 1 == n && LeakboundInNoModule(pc)) {
    kept += LeakboundScanPast(pc, s->frames + kept, kScannedFrames);
  }
  s->frame_count = at < n ? kept : 0;
}

/* The hook's side, on a new block at a site the marker asked about: take the callers if no other
 * thread is taking them, then keep the block as a sample while there is room. With a Python
 * tracer present, nothing is taken until it traces (the line would be missing). */
static __attribute__((noinline, cold)) void SampleSlow(size_t slot, uintptr_t pc, void* block, int state) {
  Site* s = &g_sites[slot];
  SiteSamples* cold = SamplesOf(slot);
  if (t_unwinding || cold == NULL) return;
  if (state == kFramesWanted) {
    int wanted = kFramesWanted;
    if (!atomic_load_explicit(&g_unwinder_ready, memory_order_relaxed) ||
        !atomic_compare_exchange_strong(&s->frames_state, &wanted, kFramesTaking)) {
      return;
    }
    Capture(cold, pc);
    atomic_store_explicit(&s->frames_state, kSampling, memory_order_release);
  }
  /* With the module's tracer present, only blocks with a line are kept: none while it is not
   * tracing, none from a thread it does not trace (only the main thread's line is known). */
  if (atomic_load_explicit(&g_python_tracer, memory_order_relaxed) &&
      (!atomic_load_explicit(&g_python_tracing, memory_order_relaxed) || t_python_where == NULL)) {
    return;
  }
  const int at = atomic_fetch_add_explicit(&cold->samples_claimed, 1, memory_order_relaxed);
  if (at >= LEAKBOUND_WATCH_SAMPLES) return;
  cold->sample_where[at] = t_python_where;
  atomic_store_explicit(&cold->sample_block[at], block, memory_order_release);
  if (at == LEAKBOUND_WATCH_SAMPLES - 1) {
    atomic_store_explicit(&s->frames_state, kSampled, memory_order_release);
  }
}

static __attribute__((noinline, cold)) void SampleFreed(size_t slot, void* block) {
  SiteSamples* cold = SamplesOf(slot);
  if (cold == NULL) return;
  for (int i = 0; i < LEAKBOUND_WATCH_SAMPLES; ++i) {
    void* expected = block;
    if (atomic_load_explicit(&cold->sample_block[i], memory_order_relaxed) == block &&
        atomic_compare_exchange_strong(&cold->sample_block[i], &expected, NULL)) {
      return;
    }
  }
}

int LeakboundSiteFrames(uint32_t site, uintptr_t* out, int most, int* scanned_from) {
  if (site == 0 || site > kSiteSlots) return 0;
  if (atomic_load_explicit(&g_sites[site - 1].frames_state, memory_order_acquire) < kSampling) {
    return 0;
  }
  const SiteSamples* s = SamplesOf(site - 1);
  if (s == NULL) return 0;
  int n = s->frame_count;
  if (n > most) n = most;
  *scanned_from = s->scanned_from;
  if (n > 0) memcpy(out, s->frames, (size_t)n * sizeof *out);
  return n > 0 ? n : 0;
}

int LeakboundSiteFramesDue(uint32_t site) {
  if (site == 0 || site > kSiteSlots) return 0;
  SiteCold* s = &g_cold[site - 1];
  _Atomic int* state = &g_sites[site - 1].frames_state;
  if (s->frames_sent || s->grew < LEAKBOUND_WATCH_FRAMES_AFTER) return 0;
  if (atomic_load_explicit(&s->samples, memory_order_relaxed) == 0) {
    if (g_samples_used == kSampledSites) return 0; /* the pool is spent: never asked */
    atomic_store_explicit(&s->samples, ++g_samples_used, memory_order_release);
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

int LeakboundSitePythonDue(uint32_t site, LeakboundSitePython* out) {
  if (site == 0 || site > kSiteSlots) return 0;
  SiteCold* s = &g_cold[site - 1];
  const int state = atomic_load_explicit(&g_sites[site - 1].frames_state, memory_order_acquire);
  if (s->python_sent || state < kSampling) return 0;
  /* Samples are read once their blocks had a step to die in: two visits after the last one was
   * kept, or LEAKBOUND_WATCH_SAMPLE_VISITS visits after the callers (a site that allocates
   * rarely). */
  ++s->visits_sampling;
  if (state == kSampled) ++s->visits_full;
  if (s->visits_full < 2 && s->visits_sampling < LEAKBOUND_WATCH_SAMPLE_VISITS) return 0;
  const SiteSamples* samples = SamplesOf(site - 1);
  if (samples == NULL) return 0;
  int taken = atomic_load_explicit(&samples->samples_claimed, memory_order_relaxed);
  if (taken > LEAKBOUND_WATCH_SAMPLES) taken = LEAKBOUND_WATCH_SAMPLES;
  memset(out, 0, sizeof *out);
  out->taken = taken;
  for (int i = 0; i < taken; ++i) {
    if (atomic_load_explicit(&samples->sample_block[i], memory_order_acquire) == NULL) continue;
    ++out->live;
    const char* where = samples->sample_where[i];
    if (where == NULL) continue;
    int here = 0;
    for (int j = 0; j < taken; ++j) {
      /* The block first (acquire): its line was written before it. */
      if (atomic_load_explicit(&samples->sample_block[j], memory_order_acquire) != NULL &&
          samples->sample_where[j] == where) {
        ++here;
      }
    }
    if (here > out->live_here) {
      out->live_here = here;
      out->where = where;
    }
  }
  s->python_sent = 1;
  /* Its callers stay readable; its frees stop looking for samples. */
  atomic_store_explicit(&g_sites[site - 1].frames_state, kReported, memory_order_release);
  return out->where != NULL;
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

static __attribute__((noinline, cold)) uint32_t SiteForOverflow(uintptr_t pc, uint64_t hash) {
  const size_t size = kSiteSlots - ((size_t)1 << kSiteBits);
  const uint32_t site = Probe(pc, (size_t)1 << kSiteBits, size, (size_t)(hash % size));
  if (site == 0) atomic_fetch_add_explicit(&g_sites_dropped, 1, memory_order_relaxed);
  return site;
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
}

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
  atomic_store_explicit(&d->bytes, LoadRelaxed(&d->bytes) + bytes, memory_order_relaxed);
  atomic_store_explicit(&d->allocations, LoadRelaxed(&d->allocations) + count,
                        memory_order_relaxed);
}

static inline void AddRelaxed(_Atomic int64_t* field, int64_t by) {
  atomic_store_explicit(field, LoadRelaxed(field) + by, memory_order_relaxed);
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
static __attribute__((noinline)) void CensusBook(uint32_t slot, uint32_t census, unsigned stamp,
                                                 int64_t bytes, int64_t blocks, int born) {
  SiteCensus* c = &g_site_census[census - 1];
  const unsigned cohort = stamp & 0xff;
  if (((stamp >> 8) & 0xff) != c->generation || cohort < c->first ||
      cohort >= LEAKBOUND_HEAP_COHORTS) {
    return; /* born before its census began, or in an earlier generation (a fork's parent) */
  }
  const uint64_t key = (c->epoch << 8) | cohort;
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

void LeakboundSiteAlloc(uint32_t site, uint32_t slot, void* block, int64_t bytes,
                        unsigned stamp) {
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
  if (__builtin_expect(state == kFramesWanted || state == kSampling, 0)) {
    SampleSlow(site - 1, atomic_load_explicit(&s->pc, memory_order_relaxed), block, state);
  }
}

void LeakboundSiteFree(uint32_t site, uint32_t slot, void* block, int64_t bytes,
                       unsigned stamp) {
  if (site == 0 || site > kSiteSlots) return;
  Book(slot, site, -bytes, -1);
  Site* s = &g_sites[site - 1];
  /* A block in a census cohort was born after the census began (LeakboundSiteAlloc). */
  const uint32_t census = atomic_load_explicit(&s->census, memory_order_acquire);
  if (__builtin_expect(census != 0, 0)) CensusBook(slot, census, stamp, bytes, 1, 0);
  const int state = atomic_load_explicit(&s->frames_state, memory_order_relaxed);
  if (__builtin_expect(state == kSampling || state == kSampled, 0)) SampleFreed(site - 1, block);
}

void LeakboundSiteMapped(uint32_t site, uintptr_t start, int64_t bytes, int64_t blocks,
                         unsigned stamp) {
  if (site == 0 || site > kSiteSlots || (bytes == 0 && blocks == 0)) return;
  atomic_store_explicit(&g_cold[site - 1].mapping, 1, memory_order_relaxed);
  Book(0, site, bytes, blocks); /* the shared slot: mappings are few, and any thread unmaps */
  Site* s = &g_sites[site - 1];
  const uint32_t census = atomic_load_explicit(&s->census, memory_order_acquire);
  const int born = bytes > 0 || blocks > 0;
  if (census != 0) {
    CensusBook(0, census, stamp, born ? bytes : -bytes, born ? blocks : -blocks, born);
  }
  const int state = atomic_load_explicit(&s->frames_state, memory_order_relaxed);
  if (bytes > 0 && blocks > 0 && (state == kFramesWanted || state == kSampling)) {
    SampleSlow(site - 1, atomic_load_explicit(&s->pc, memory_order_relaxed), (void*)start, state);
  } else if (!born && blocks < 0 && (state == kSampling || state == kSampled)) {
    SampleFreed(site - 1, (void*)start);
  }
}

int LeakboundSiteIsMapping(uint32_t site) {
  return site != 0 && site <= kSiteSlots &&
         atomic_load_explicit(&g_cold[site - 1].mapping, memory_order_relaxed);
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
    for (int e = 0; e < (1 << kDeltaBits); ++e) {
      SiteDelta* d = &g_deltas[k][e];
      SeenDelta* seen = &g_seen[k][e];
      const uint32_t site = atomic_load_explicit(&d->site, memory_order_relaxed);
      const int64_t bytes = LoadRelaxed(&d->bytes);
      const int64_t allocations = LoadRelaxed(&d->allocations);
      if (site == seen->site && bytes == seen->bytes && allocations == seen->allocations) continue;
      List(site);
      if (seen->site != site) List(seen->site); /* folded: in the ring too, unless lapped */
      seen->site = site;
      seen->bytes = bytes;
      seen->allocations = allocations;
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
    if (!s->named || bytes != s->sent_bytes || allocations != s->sent_allocations) {
      if (s->named && bytes > s->sent_bytes) ++s->grew;
      visit(i + 1, pc, bytes, allocations, !s->named, context);
      s->named = 1;
      s->sent_bytes = bytes;
      s->sent_allocations = allocations;
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
    g_cold[i].python_sent = 0;
    g_cold[i].visits_sampling = 0;
    g_cold[i].visits_full = 0;
    g_cold[i].census_asked = 0;
    atomic_store_explicit(&g_sites[i].census, 0, memory_order_relaxed);
    /* A forked child samples anew: the parent's samples are its blocks and its lines. Callers
     * already taken stay (the same code); a capture another thread was in is lost with it. */
    const int state = atomic_load_explicit(&g_sites[i].frames_state, memory_order_relaxed);
    SiteSamples* samples = SamplesOf(i);
    if (state != kFramesNone && samples != NULL) {
      atomic_store_explicit(&samples->samples_claimed, 0, memory_order_relaxed);
      for (int k = 0; k < LEAKBOUND_WATCH_SAMPLES; ++k) {
        atomic_store_explicit(&samples->sample_block[k], NULL, memory_order_relaxed);
        samples->sample_where[k] = NULL;
      }
      atomic_store_explicit(&g_sites[i].frames_state,
                            state == kFramesTaking ? kFramesNone
                            : state >= kSampling   ? kSampling
                                                   : state,
                            memory_order_relaxed);
    }
  }
  /* The child's module (the same interpreter: a tracer is still present) drops a tracer it
   * inherited from a traced step and traces again from its own steps (watch/python/leakbound). */
  atomic_store(&g_python_tracing, 0);
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
  t_python_where = NULL;
}

/* The leakbound module's side (watch/python/leakbound): it says whether its tracer runs (1),
 * will run when sites wait (0: samples wait for it) or never again (-1: samples are taken
 * without a line), asks how many sites wait for samples (the count at the last marker), and
 * sets the thread's line ("FILE:LINE in FUNCTION", a buffer it keeps alive; NULL: none). */
LB_EXPORT void leakbound_python_tracer(int mode) {
  atomic_store(&g_python_tracer, mode >= 0);
  atomic_store(&g_python_tracing, mode > 0);
  if (mode <= 0) t_python_where = NULL;
}

LB_EXPORT int leakbound_python_sites_waiting(void) {
  return atomic_load_explicit(&g_sites_waiting, memory_order_relaxed);
}

LB_EXPORT void leakbound_python_where(const char* where) { t_python_where = where; }
