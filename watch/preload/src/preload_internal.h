/* Internal interfaces of libleakbound_preload.so (the `leakbound watch` preload): the call-site
 * table (sites.c), the mapped-bytes counter (front_end.c) and what the marker (marker.c) needs.
 * Nothing here allocates or locks, except the reporting side named as such. */
#ifndef LEAKBOUND_WATCH_PRELOAD_INTERNAL_H_
#define LEAKBOUND_WATCH_PRELOAD_INTERNAL_H_

#include <stdatomic.h>
#include <stdint.h>

#include "heap_core.h"
#include "leakbound/watch/channel.h"

#define LB_HIDDEN __attribute__((visibility("hidden")))
#define LB_EXPORT __attribute__((visibility("default")))

/* 1 when call sites are recorded: from the process's first sample (its first step, clock tick
 * or timer sample: LeakboundSitesStart, under the marker's lock) when they are wanted
 * (LEAKBOUND_WATCH_SITES != "0"), never otherwise. 0 until then: what libc, the libraries'
 * initialisers and the program's start-up (`import torch`: ~15,000 sites, 2.3 million blocks)
 * allocate has no call site, so that the hooks pay for sites only in the steps that call sites
 * are for (a run without them never stores one, and its frees never read the sites' array:
 * LeakboundHeapOnFreeSiteless). A block without a site is in the counters and the census, not in
 * any site's books: a free finds site 0 and books nothing. The switch goes one way, and a thread
 * that frees a block another allocated with a site sees it set (the program's own hand-over of
 * the block orders the two), so a site's books never miss the free of a block they counted. */
extern LB_HIDDEN int g_leakbound_sites_on;
/* 1 when call sites are wanted (set by the constructor). */
extern LB_HIDDEN int g_leakbound_sites_wanted;
/* Turns call sites on for the hooks (front_end.c): the free hooks' path first (it frees a block
 * without a site as well), then g_leakbound_sites_on and the allocation hooks' path, so that no
 * block recorded with a site is freed by the path that ignores sites. Also in a forked child whose
 * parent forked between those stores (marker.c). */
LB_HIDDEN void LeakboundHooksSitesOn(void);
/* Switches call sites on if they are wanted and not on yet (the marker, at a sample). */
static inline void LeakboundSitesStart(void) {
  if (g_leakbound_sites_wanted && !__atomic_load_n(&g_leakbound_sites_on, __ATOMIC_RELAXED)) {
    /* The core's flag, true to what records may hold from now on (for OnFree, which this
     * library's frees do not use: with sites on they take OnFreeTaken / OnFreeFast). */
    LeakboundHeapSitesStored();
    LeakboundHooksSitesOn();
  }
}

/* Site id (1-based, fits the core's 16-bit slot) of an allocation made from pc. When the table
 * is full, the overflow site: one row for every pc past the table's room, whose samples keep
 * each allocation's own pc as their first frame. Lock-free. */
LB_HIDDEN uint32_t LeakboundSiteFor(uintptr_t pc);
/* The overflow site's pc: no code is at address 1. */
#define LEAKBOUND_OVERFLOW_PC ((uintptr_t)1)
/* A block of `bytes` allocated at / freed from site (the hooks, after the core's record): adds
 * to the site's survivors and, at a site the marker asked about, takes callers and samples.
 * slot: the thread's heap-core slot + 1 (LeakboundHeapOnAllocAt's value, LeakboundHeapTaken's
 * slot), whose per-thread books take the bytes; 0 or 1 (unknown, the shared slot): atomics.
 * stamp: the block's birth stamp (LeakboundHeapOnAllocStamped, LeakboundHeapTaken.epoch), for
 * the census of a site that has one. pc: the allocating call's return address (what the
 * overflow site's samples are taken for). */
LB_HIDDEN void LeakboundSiteAlloc(uint32_t site, uint32_t slot, void* block, int64_t bytes,
                                  unsigned stamp, uintptr_t pc);
LB_HIDDEN void LeakboundSiteFree(uint32_t site, uint32_t slot, void* block, int64_t bytes,
                                 unsigned stamp);
/* The hooks' common paths with call sites on (sites.c, inlined into front_end.c by link-time
 * optimisation): a site already in its first probe's slot, a block the core's fast path takes
 * (heap_core.h, LeakboundHeapOnAllocFast / OnFreeFast), books as LeakboundSiteAlloc / Free keep
 * them. CountedFast: 1 when the block was recorded and booked, 0 when nothing was done (the
 * general path follows); in_hold: the caller is the general path, which a hold of the core's fast
 * paths sends every allocation to (LeakboundHeapOnAllocFastInHold). UncountedFast: 1 when done
 * (taken and booked, or not recorded), 0 when nothing was done. */
LB_HIDDEN int LeakboundSiteCountedFast(void* block, uint64_t size, uintptr_t pc, int in_hold);
LB_HIDDEN int LeakboundSiteUncountedFast(void* block);
/* The free hooks' whole path with call sites on: the books of the block's site, then glibc's
 * free, out of line (the hook reaches it by a tail call). Its common path calls nothing but
 * __libc_free, as a tail call;
 * a block the core's fast path cannot take goes to LeakboundFreeGeneral (front_end.c, out of
 * line), which books it the general way and frees it. */
LB_HIDDEN void LeakboundSiteFreeBlock(void* block);
/* The hooks' common paths keep no frame pointer (the library is built with them, for the stack
 * scan): free's never calls anything but glibc, and the allocation hooks' general path, reached
 * by tail calls, keeps one (LeakboundSiteMalloc). */
/* Only when the library is built with link-time optimisation: the core's paths are inlined into
 * the counting paths, no local's address escapes, and their calls of the general path are tail
 * calls. Without it a counting path calls the general path as any call, and its own frame pointer
 * is what the scan's chain needs (the hook's return address right above it). */
#if defined(LEAKBOUND_PRELOAD_IPO)
#define LB_HOOK_FRAMELESS __attribute__((optimize("omit-frame-pointer")))
#else
#define LB_HOOK_FRAMELESS
#endif
LB_HIDDEN void LeakboundFreeGeneral(void* block);
/* malloc's whole path with call sites on (malloc jumps to it): glibc's malloc, then the block's
 * record and its site's books; returns the block. Its pc is the return address malloc's jump
 * left. It keeps no frame pointer (it saves registers across glibc's call), and its common path
 * calls nothing after it; a block or site it cannot take goes to LeakboundAllocGeneral
 * (front_end.c), by a tail call, which keeps its frame pointer: the stack scan's chain of frames
 * then finds the allocating call's return address right above that frame. */
LB_HIDDEN void* LeakboundSiteMalloc(size_t size);
/* operator new(size_t)'s the same way (a size of 0 asks for 1); a failed glibc malloc goes to
 * LeakboundNewFailed (the real operator new: its new-handler, or bad_alloc). */
LB_HIDDEN void* LeakboundSiteNew(size_t size);
LB_HIDDEN void* LeakboundNewFailed(size_t bytes);
LB_HIDDEN void* LeakboundAllocGeneral(void* block, uint64_t size, uintptr_t pc);

/* Reporting side (the marker, never a hook): visits every site whose survivors changed since
 * the previous visit; first_time is 1 the first time a site is visited. Not thread-safe: the
 * marker serialises its callers. */
typedef void (*LeakboundSiteVisitor)(uint32_t site, uintptr_t pc, int64_t bytes,
                                     int64_t allocations, int first_time, void* context);
/* The callers of an allocation at site (return addresses, innermost first) into `out`, at most
 * `most`; their number. 0 until they were taken, or when none could be. Frames from
 * *scanned_from on were found by a stack scan past code of no module (LeakboundScanPast). */
LB_HIDDEN int LeakboundSiteFrames(uint32_t site, uintptr_t* out, int most, int* scanned_from);
/* stack_scan.c. Whether pc is in no loaded module (generated code). */
LB_HIDDEN int LeakboundInNoModule(uintptr_t pc);
/* From the hook's frames: up to `most` return addresses into modules, each after a call
 * instruction, among the words above the slot holding pc (the return address of the allocating
 * call, in code the unwinder cannot step through); their number. Once per asked site. */
LB_HIDDEN int LeakboundScanPast(uintptr_t pc, uintptr_t* out, int most);
/* Whether site's callers are to be sent now: once its survivors grew at
 * LEAKBOUND_WATCH_FRAMES_AFTER visits it asks for them (the next allocation there takes them;
 * its census begins), provided may_ask, and once they are taken it says 1, once. A site asked
 * in this series (since the last LeakboundSitesForget) goes on whatever may_ask says later.
 * Reporting side. */
LB_HIDDEN int LeakboundSiteFramesDue(uint32_t site, int may_ask);
/* What a site's samples say, once they had time to die: the Python line most of the live
 * samples were allocated under (NULL: none carried one), how many live samples came from it,
 * how many are live, how many were taken; and, when more of the live samples came from another
 * stack than the callers LeakboundSiteFrames gave (those of the first sample), that stack
 * (restacked 1; frames as LeakboundSiteFrames gives them) and how many live samples it holds. */
typedef struct LeakboundSiteSamplesRead {
  const char* where;
  int live_here;
  int live;
  int taken;
  int restacked;
  int stack_live;
  int frame_count;
  int scanned_from;
  uintptr_t frames[LEAKBOUND_WATCH_FRAMES];
} LeakboundSiteSamplesRead;
/* 1, once, when a site's samples are read and some live ones carry a Python line, or came from
 * another stack than its callers. Reporting side; bytes: the site's live bytes at this visit. */
LB_HIDDEN int LeakboundSiteSamplesDue(uint32_t site, int64_t bytes, LeakboundSiteSamplesRead* out);
/* Once, before any site is claimed: loads the unwinder (backtrace's first call allocates). */
LB_HIDDEN void LeakboundSitesWarmUp(void);
LB_HIDDEN void LeakboundSitesVisitChanged(LeakboundSiteVisitor visit, void* context);
LB_HIDDEN uint64_t LeakboundSitesDropped(void);
/* An anonymous mapping's call site (front_end.c): `bytes` and `blocks` mapped (> 0: a mapping
 * made, or the tail of one split by a hole) or unmapped (< 0; blocks -1 when a mapping went
 * whole, 0 when it shrank), born in census stamp `stamp` (LeakboundHeapEpochNow when it was
 * made). start: the mapping's first address, for the site's samples. role: what it is
 * (LEAKBOUND_WATCH_SITE_MAPPING, or LEAKBOUND_WATCH_SITE_DEVICE for device memory,
 * device_sites.c). */
LB_HIDDEN void LeakboundSiteMapped(uint32_t site, uintptr_t start, int64_t bytes, int64_t blocks,
                                   unsigned stamp, int role);
/* What the site's allocations are: 0 (heap), LEAKBOUND_WATCH_SITE_MAPPING or _DEVICE (its SITES
 * entries say so in reserved). */
LB_HIDDEN int LeakboundSiteRole(uint32_t site);
/* The overflow site's id (sites.c): every pc past the table's room. */
LB_HIDDEN uint32_t LeakboundOverflowSite(void);
/* device_sites.c: in a forked child, the device block table starts empty. */
LB_HIDDEN void LeakboundDeviceForget(void);
/* The censuses of the sites that have one (LEAKBOUND_WATCH_SITE_CENSUS): for each, a visit with
 * cohort LEAKBOUND_WATCH_SITE_CENSUS_FROM (bytes: its first cohort), then one per non-empty
 * cohort up to cohort_now (bytes and blocks born there, still live). Reporting side. */
typedef void (*LeakboundSiteCensusVisitor)(uint32_t site, uint32_t cohort, int64_t bytes,
                                           int64_t blocks, void* context);
LB_HIDDEN void LeakboundSitesCensus(unsigned cohort_now, LeakboundSiteCensusVisitor visit,
                                    void* context);
/* Anonymous mappings so far that the mapping table did not count (front_end.c). */
LB_HIDDEN uint64_t LeakboundMappedDropped(void);
/* A new series (a forked child: forked_child 1; the program's first own step after timer or
 * clock samples: 0): every site is named and sent again, and its census starts anew. */
LB_HIDDEN void LeakboundSitesForget(int forked_child);

/* Anonymous mmap'd bytes still mapped (front_end.c). */
LB_HIDDEN uint64_t LeakboundMappedBytes(void);

/* The job's clock (channel.h, LEAKBOUND_WATCH_CLOCK): non-NULL while this process marks no step
 * of its own. An allocation hook that sees it move takes a sample (marker.c). Tested on the
 * general allocation paths only: marker.c holds the heap's fast paths while it is on
 * (LeakboundHeapHoldFastPath), so the common path pays nothing for it. */
extern LB_HIDDEN const _Atomic uint64_t* _Atomic g_leakbound_job_clock;
extern LB_HIDDEN _Atomic uint64_t g_leakbound_job_seen;
LB_HIDDEN void LeakboundJobClockSample(void);
/* Whether the job's clock moved since this process's last sample (LeakboundJobClockCheck's test). */
static inline int LeakboundJobClockMoved(void) {
  const _Atomic uint64_t* clock = atomic_load_explicit(&g_leakbound_job_clock, memory_order_relaxed);
  return __builtin_expect(clock != NULL, 0) &&
         atomic_load_explicit(clock, memory_order_relaxed) !=
             atomic_load_explicit(&g_leakbound_job_seen, memory_order_relaxed);
}
/* The allocation paths' sample at the job's clock, returning the block (a tail call's target:
 * front_end.c). */
LB_HIDDEN void* LeakboundJobClockSampleReturning(void* block);
static inline void LeakboundJobClockCheck(void) {
  const _Atomic uint64_t* clock = atomic_load_explicit(&g_leakbound_job_clock, memory_order_relaxed);
  if (__builtin_expect(clock != NULL, 0) &&
      atomic_load_explicit(clock, memory_order_relaxed) !=
          atomic_load_explicit(&g_leakbound_job_seen, memory_order_relaxed)) {
    LeakboundJobClockSample();
  }
}

#endif /* LEAKBOUND_WATCH_PRELOAD_INTERNAL_H_ */
