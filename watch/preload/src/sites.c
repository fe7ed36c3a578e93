/* Call sites of the `leakbound watch` preload: a lock-free open-addressing table from the return
 * address of an allocation call to its survivors (bytes and count still live). The hook claims
 * a slot with one CAS the first time a call site allocates and then adds with relaxed atomics;
 * the marker reads the table at step ends and reports only what changed. For the sites whose
 * survivors keep growing (at LEAKBOUND_WATCH_FRAMES_AFTER markers) the marker asks for their
 * callers; the next allocation there takes them (backtrace, once per such site: never per
 * allocation, and not for the thousands of sites a program's start-up claims) and the marker
 * sends them. */
#include <execinfo.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "preload_internal.h"

enum {
  kSiteBits = 14, /* 16384 call sites */
  kSiteProbe = 64,
};

enum { kFramesNone, kFramesWanted, kFramesTaking, kFramesTaken };

/* What the hooks touch, 32 bytes a site (the probe walks these); the rest is in SiteCold. */
typedef struct Site {
  _Atomic uintptr_t pc;
  _Atomic int frames_state; /* kFrames*: asked by the marker, taken by the next allocation */
  _Atomic int64_t bytes;
  _Atomic int64_t allocations;
} Site;

/* The callers once taken, and the reporting side's books. */
typedef struct SiteCold {
  uintptr_t frames[LEAKBOUND_WATCH_FRAMES];
  int frame_count; /* written before frames_state becomes kFramesTaken */
  int named;
  int grew; /* visits at which its survivors grew */
  int frames_sent;
  int64_t sent_bytes;
  int64_t sent_allocations;
} SiteCold;

LB_HIDDEN int g_leakbound_sites_on = 1;
static Site g_sites[1 << kSiteBits];
static SiteCold g_cold[1 << kSiteBits];
static _Atomic uint64_t g_sites_dropped;
static __thread int t_unwinding; /* backtrace may allocate: no capture inside a capture */
static _Atomic int g_unwinder_ready; /* sites claimed before the warm-up keep no callers */

void LeakboundSitesWarmUp(void) {
  void* frames[2];
  t_unwinding = 1;
  backtrace(frames, 2);
  t_unwinding = 0;
  atomic_store(&g_unwinder_ready, 1);
}

/* The callers of the allocation call at pc: what backtrace finds past the frame that returns to
 * pc (the hook's own frames come before it). */
static void Capture(SiteCold* s, uintptr_t pc) {
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
  s->frame_count = at < n ? kept : 0;
}

/* The hook's side: take the callers if the marker asked and no other thread is taking them. */
static inline void CaptureIfWanted(size_t slot, uintptr_t pc) {
  Site* s = &g_sites[slot];
  if (__builtin_expect(atomic_load_explicit(&s->frames_state, memory_order_relaxed) !=
                           kFramesWanted, 1)) {
    return;
  }
  int wanted = kFramesWanted;
  if (t_unwinding || !atomic_load_explicit(&g_unwinder_ready, memory_order_relaxed) ||
      !atomic_compare_exchange_strong(&s->frames_state, &wanted, kFramesTaking)) {
    return;
  }
  Capture(&g_cold[slot], pc);
  atomic_store_explicit(&s->frames_state, kFramesTaken, memory_order_release);
}

int LeakboundSiteFrames(uint32_t site, uintptr_t* out, int most) {
  if (site == 0 || site > (1u << kSiteBits)) return 0;
  if (atomic_load_explicit(&g_sites[site - 1].frames_state, memory_order_acquire) != kFramesTaken) {
    return 0;
  }
  const SiteCold* s = &g_cold[site - 1];
  int n = s->frame_count;
  if (n > most) n = most;
  if (n > 0) memcpy(out, s->frames, (size_t)n * sizeof *out);
  return n > 0 ? n : 0;
}

int LeakboundSiteFramesDue(uint32_t site) {
  if (site == 0 || site > (1u << kSiteBits)) return 0;
  SiteCold* s = &g_cold[site - 1];
  _Atomic int* state = &g_sites[site - 1].frames_state;
  if (s->frames_sent || s->grew < LEAKBOUND_WATCH_FRAMES_AFTER) return 0;
  int none = kFramesNone;
  atomic_compare_exchange_strong(state, &none, kFramesWanted); /* ask once */
  if (atomic_load_explicit(state, memory_order_acquire) != kFramesTaken) return 0;
  s->frames_sent = 1;
  return 1;
}

uint32_t LeakboundSiteFor(uintptr_t pc) {
  uint64_t hash = (uint64_t)pc * 0x9E3779B97F4A7C15ull;
  size_t slot = (size_t)(hash >> (64 - kSiteBits));
  for (int probe = 0; probe < kSiteProbe; ++probe, slot = (slot + 1) & ((1u << kSiteBits) - 1)) {
    uintptr_t seen = atomic_load_explicit(&g_sites[slot].pc, memory_order_relaxed);
    if (seen == pc) {
      CaptureIfWanted(slot, pc);
      return (uint32_t)slot + 1;
    }
    if (seen == 0 && atomic_compare_exchange_strong_explicit(&g_sites[slot].pc, &seen, pc,
                                                             memory_order_relaxed,
                                                             memory_order_relaxed)) {
      return (uint32_t)slot + 1;
    }
    if (seen == pc) return (uint32_t)slot + 1; /* another thread claimed it for the same pc */
  }
  atomic_fetch_add_explicit(&g_sites_dropped, 1, memory_order_relaxed);
  return 0;
}

void LeakboundSiteAdd(uint32_t site, int64_t bytes, int64_t allocations) {
  if (site == 0 || site > (1u << kSiteBits)) return;
  Site* s = &g_sites[site - 1];
  atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->allocations, allocations, memory_order_relaxed);
}

void LeakboundSitesVisitChanged(LeakboundSiteVisitor visit, void* context) {
  for (uint32_t i = 0; i < (1u << kSiteBits); ++i) {
    Site* hot = &g_sites[i];
    SiteCold* s = &g_cold[i];
    uintptr_t pc = atomic_load_explicit(&hot->pc, memory_order_relaxed);
    if (pc == 0) continue;
    int64_t bytes = atomic_load_explicit(&hot->bytes, memory_order_relaxed);
    int64_t allocations = atomic_load_explicit(&hot->allocations, memory_order_relaxed);
    if (s->named && bytes == s->sent_bytes && allocations == s->sent_allocations) continue;
    if (s->named && bytes > s->sent_bytes) ++s->grew;
    visit(i + 1, pc, bytes, allocations, !s->named, context);
    s->named = 1;
    s->sent_bytes = bytes;
    s->sent_allocations = allocations;
  }
}

uint64_t LeakboundSitesDropped(void) { return atomic_load(&g_sites_dropped); }

void LeakboundSitesForget(void) {
  for (uint32_t i = 0; i < (1u << kSiteBits); ++i) {
    g_cold[i].named = 0;
    g_cold[i].sent_bytes = 0;
    g_cold[i].sent_allocations = 0;
    g_cold[i].grew = 0;
    g_cold[i].frames_sent = 0;
  }
}
