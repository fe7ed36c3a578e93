/* Call sites of the `leakbound watch` preload: a lock-free open-addressing table from the return
 * address of an allocation call to its survivors (bytes and count still live). The hook claims
 * a slot with one CAS the first time a call site allocates and then adds with relaxed atomics;
 * the marker reads the table at step ends and reports only what changed. The thread that claims
 * a slot also keeps the callers of that first allocation (backtrace, once per call site: the
 * unwinder's cost is paid per site, never per allocation); the marker sends them for the sites
 * that keep growing. */
#include <execinfo.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "preload_internal.h"

enum {
  kSiteBits = 14, /* 16384 call sites */
  kSiteProbe = 64,
};

typedef struct Site {
  _Atomic uintptr_t pc;
  _Atomic int64_t bytes;
  _Atomic int64_t allocations;
  uintptr_t frames[LEAKBOUND_WATCH_FRAMES];
  _Atomic int frame_count; /* published after frames[] is written (0 until then) */
  /* Reporting side only. */
  int64_t sent_bytes;
  int64_t sent_allocations;
  int named;
  int grew;        /* visits at which its survivors grew */
  int frames_sent;
} Site;

LB_HIDDEN int g_leakbound_sites_on = 1;
static Site g_sites[1 << kSiteBits];
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
static void Capture(Site* s, uintptr_t pc) {
  if (t_unwinding || !atomic_load_explicit(&g_unwinder_ready, memory_order_relaxed)) return;
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
  atomic_store_explicit(&s->frame_count, at < n ? kept : 0, memory_order_release);
}

int LeakboundSiteFrames(uint32_t site, uintptr_t* out, int most) {
  if (site == 0 || site > (1u << kSiteBits)) return 0;
  Site* s = &g_sites[site - 1];
  int n = atomic_load_explicit(&s->frame_count, memory_order_acquire);
  if (n > most) n = most;
  if (n > 0) memcpy(out, s->frames, (size_t)n * sizeof *out);
  return n > 0 ? n : 0;
}

int LeakboundSiteFramesDue(uint32_t site) {
  if (site == 0 || site > (1u << kSiteBits)) return 0;
  Site* s = &g_sites[site - 1];
  if (s->frames_sent || s->grew < LEAKBOUND_WATCH_FRAMES_AFTER) return 0;
  s->frames_sent = 1;
  return 1;
}

uint32_t LeakboundSiteFor(uintptr_t pc) {
  uint64_t hash = (uint64_t)pc * 0x9E3779B97F4A7C15ull;
  size_t slot = (size_t)(hash >> (64 - kSiteBits));
  for (int probe = 0; probe < kSiteProbe; ++probe, slot = (slot + 1) & ((1u << kSiteBits) - 1)) {
    uintptr_t seen = atomic_load_explicit(&g_sites[slot].pc, memory_order_relaxed);
    if (seen == pc) return (uint32_t)slot + 1;
    if (seen == 0 && atomic_compare_exchange_strong_explicit(&g_sites[slot].pc, &seen, pc,
                                                             memory_order_relaxed,
                                                             memory_order_relaxed)) {
      Capture(&g_sites[slot], pc);
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
    Site* s = &g_sites[i];
    uintptr_t pc = atomic_load_explicit(&s->pc, memory_order_relaxed);
    if (pc == 0) continue;
    int64_t bytes = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    int64_t allocations = atomic_load_explicit(&s->allocations, memory_order_relaxed);
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
    g_sites[i].named = 0;
    g_sites[i].sent_bytes = 0;
    g_sites[i].sent_allocations = 0;
    g_sites[i].grew = 0;
    g_sites[i].frames_sent = 0;
  }
}
