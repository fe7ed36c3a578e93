/* The call-site table's state shared by sites.c (the table, its books and censuses) and
 * samples.c (the callers and samples of the sites the marker asks about). Internal to the
 * preload. */
#ifndef LEAKBOUND_WATCH_PRELOAD_SITES_INTERNAL_H_
#define LEAKBOUND_WATCH_PRELOAD_SITES_INTERNAL_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "preload_internal.h"

/* Call sites: 65,535 slots in two parts (a site's id, 1-based, is 16 bits of a heap record). A
 * site's pc is hashed into the first 32,768 (the hot part: a program's sites touch its pages
 * only); only when 64 probes there find no room does it go to the other 32,766 (pages touched only
 * by a program with that many sites; the arrays are zero bss, so untouched parts cost address
 * space, not memory). The hot part was 16,384: `import torch` claims ~15,400 sites, so probes
 * were long and many sites spilled into the other part, each touching a page of its own there
 * (2.9 MiB of Site and SiteCold resident, 2.0 MiB now, with SiteCold at 32 bytes instead of 48;
 * the PyTorch run's task-clock the same within its spread). */
enum {
  kSiteBits = 15,            /* the hot part: 32,768 slots */
  kSiteSlots = (1 << 16) - 1, /* the whole table: ids 1..65,535 fit a record's 16 bits */
  kSiteProbe = 64,
  kOverflowSite = kSiteSlots, /* the last slot: every pc past the table's room */
};

/* A site's callers and samples: asked by the marker, the callers taken by the next allocation,
 * then samples until LEAKBOUND_WATCH_SAMPLES were kept (kSampled), read by the marker again and
 * again while they die (a free of a sampled block still marks it dead), until a read finds none
 * live or the last read is done (kRead: its frees stop looking for samples). While it reads
 * them, a sample whose block died is taken again (kRefill, SiteSamples.refill_*): by one
 * allocation drawn evenly from the site's allocations between the visit that armed it and the
 * next one. So the samples become survivors: a caller that leaks once in many allocations at its
 * site (every other step, behind callers whose copies live a few steps or die at once) is among
 * them sooner or later, whichever allocations the first 16 happened to be. Drawn from the whole
 * stretch between two visits, not the first allocation after one: a visit is a marker at which
 * the site's books changed, for such a site only the leaking steps, so the first allocation
 * after a visit was always in a step the caller skips. */
enum { kFramesNone, kFramesWanted, kFramesTaking, kSampling, kSampled, kRefill, kRead };

/* A state in which the site's next allocation is taken as a sample (or its callers). */
static inline int LeakboundSiteTakes(int state) {
  return state == kFramesWanted || state == kSampling || state == kRefill;
}
/* A state in which the site holds samples whose frees must be seen. */
static inline int LeakboundSiteHolds(int state) {
  return state == kSampling || state == kSampled || state == kRefill;
}

/* What the hooks touch, 32 bytes a site (the probe walks these); the rest is in SiteCold. */
typedef struct Site {
  _Atomic uintptr_t pc;
  _Atomic int frames_state; /* kFrames*: asked by the marker, taken by the next allocation */
  _Atomic uint32_t census;  /* its SiteCensus + 1 (0: none) */
  _Atomic int64_t bytes;
  _Atomic int64_t allocations;
} Site;

/* A stack: return addresses, innermost first; frames from scanned_from on were found by a stack
 * scan past code of no module (stack_scan.c). */
typedef struct SiteStack {
  uintptr_t frames[LEAKBOUND_WATCH_FRAMES];
  int count;
  int scanned_from;
} SiteStack;

/* The callers once taken and the samples of a site the marker asked about: in a pool, taken
 * when the marker first asks (most sites are never asked: 320 bytes each for all 16,384 sites
 * were ~5 MiB of a PyTorch run's resident memory). The pool is mapped in chunks of
 * kSamplesPerChunk as sites are asked (1,488 bytes a site: a static pool of 4,096 was 6 MiB of
 * address space, enough to cost a program under `ulimit -v` one of its blocks). Each sample keeps the stack it was allocated
 * from, so that a site reached from several callers is named by the one its survivors came
 * from (the callers are those of its first allocation after it was seen growing). */
typedef struct SiteSamples {
  SiteStack callers; /* written before frames_state becomes kSampling */
  _Atomic int samples_claimed;
  void* _Atomic sample_block[LEAKBOUND_WATCH_SAMPLES]; /* NULL once freed */
  const char* sample_where[LEAKBOUND_WATCH_SAMPLES];   /* the Python line, or NULL */
  SiteStack sample_stack[LEAKBOUND_WATCH_SAMPLES];     /* written before its block */
  /* Odd while the reservoir writes the sample again (a seqlock: the marker copies a sample's
   * line and stack, and keeps the copy only if this did not move meanwhile). */
  _Atomic uint32_t sample_version[LEAKBOUND_WATCH_SAMPLES];
  /* The marker's reads (the reporting side): the samples are read again at twice the visits of
   * the read before (a block held for a while, a cache that turns over slowly, dies between two
   * reads; what survives them all is what the row is named by), and what the watcher was last
   * sent is sent again only when it changed. */
  /* The refill (kRefill): sample refill_slot (dead when armed) goes to an allocation drawn
   * from the site's allocations until the next visit (a reservoir of one per thread: the n-th of
   * a thread's replaces the one drawn before with probability 1/n, counted in the thread's own
   * books so that threads share no counter; each replacement takes its stack, ~ln n captures a
   * refill). Armed by the marker at a visit (a new refill_round), read by the hooks. */
  _Atomic int refill_slot;
  _Atomic uint32_t refill_round;
  int next_read;            /* visits_sampling of the next read; 0: not read yet */
  int64_t read_bytes;       /* the site's live bytes at the last read (before the first: the
                             * last visit) */
  const char* sent_where;   /* the line last sent, or NULL */
  int sent_live_here, sent_live;
  uint64_t sent_stack;      /* a hash of the stack the watcher names the row by */
} SiteSamples;
enum { kSampledSites = 4096 }; /* sites asked beyond these get no callers (their name stays) */
enum { kSamplesPerChunk = 64, kSampleChunks = kSampledSites / kSamplesPerChunk };
enum { kScannedFrames = 4 };   /* callers a stack scan may add past code of no module */

/* The reporting side's books. */
typedef struct SiteCold {
  _Atomic uint32_t samples; /* its SiteSamples + 1, set before the marker first asks; 0: none */
  int32_t visits_sampling; /* visits since the callers were taken */
  int64_t sent_bytes;
  uint32_t sent_allocations; /* the low 32 bits: only compared, never sent */
  uint8_t named;
  uint8_t grew;        /* visits at which its survivors grew (counted up to 255) */
  uint8_t frames_sent;
  uint8_t visits_full; /* visits since its last sample was kept (counted up to 255) */
  uint8_t census_asked; /* a census was given it, or none was left */
  _Atomic uint8_t role; /* its allocations: heap blocks (0), mappings (LEAKBOUND_WATCH_SITE_MAPPING),
                         * device memory (LEAKBOUND_WATCH_SITE_DEVICE) */
} SiteCold;
_Static_assert(sizeof(SiteCold) == 32, "SiteCold: 32 bytes a slot, touched for every site a program has");

extern LB_HIDDEN Site g_sites[kSiteSlots];
extern LB_HIDDEN SiteCold g_cold[kSiteSlots];
extern LB_HIDDEN SiteSamples* _Atomic g_sample_chunks[kSampleChunks];
extern LB_HIDDEN uint32_t g_samples_used; /* the marker's (under its lock) */
extern LB_HIDDEN _Atomic int g_sites_waiting; /* sites asked for callers or samples, last visit */

/* A site's samples, or NULL when the marker never asked about it. Its chunk was mapped before
 * the site's index was published. */
static inline SiteSamples* SamplesOf(size_t slot) {
  const uint32_t at = atomic_load_explicit(&g_cold[slot].samples, memory_order_acquire);
  if (at == 0) return NULL;
  SiteSamples* chunk = atomic_load_explicit(&g_sample_chunks[(at - 1) / kSamplesPerChunk],
                                            memory_order_relaxed);
  return &chunk[(at - 1) % kSamplesPerChunk];
}
/* The marker's side (under its lock): a pool entry for a site it asks about, its index + 1, or 0
 * when the pool is spent or its chunk could not be mapped (the site keeps its name). */
LB_HIDDEN uint32_t LeakboundSamplesTake(void);

/* samples.c. The hook's side, on a new block at a site the marker asked about (state:
 * kFramesWanted or kSampling), and on a freed block of a site that samples. pc: the allocating
 * call's return address (for the overflow site, the allocation's own, not the site's). The
 * overflow site's samples are a reservoir of survivors: a sample whose block was freed is taken
 * again by the next allocation there (its allocations come from thousands of pcs, most of them
 * freed at once: the first 16 would rarely hold what stays). */
LB_HIDDEN void LeakboundSampleSlow(size_t slot, uintptr_t pc, void* block, int state);
LB_HIDDEN void LeakboundSampleFreed(size_t slot, void* block);
/* Series restarts and forked children: slot's samples are dropped (LeakboundSitesForget), and
 * the Python tracer's state with them (and, in a forked child, the reservoir's flag, which a
 * thread the child does not have may have held). */
LB_HIDDEN void LeakboundSamplesForget(size_t slot, int forked_child);
LB_HIDDEN void LeakboundSamplesForgetAll(int forked_child);

#endif /* LEAKBOUND_WATCH_PRELOAD_SITES_INTERNAL_H_ */
