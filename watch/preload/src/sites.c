/* Call sites of the `leakbound watch` preload: a lock-free open-addressing table from the return
 * address of an allocation call to its survivors (bytes and count still live). The hook claims
 * a slot with one CAS the first time a call site allocates and then adds with relaxed atomics;
 * the marker reads the table at step ends and reports only what changed. */
#include <stdatomic.h>
#include <stddef.h>

#include "preload_internal.h"

enum {
  kSiteBits = 14, /* 16384 call sites */
  kSiteProbe = 64,
};

typedef struct Site {
  _Atomic uintptr_t pc;
  _Atomic int64_t bytes;
  _Atomic int64_t allocations;
  /* Reporting side only. */
  int64_t sent_bytes;
  int64_t sent_allocations;
  int named;
} Site;

LB_HIDDEN int g_leakbound_sites_on = 1;
static Site g_sites[1 << kSiteBits];
static _Atomic uint64_t g_sites_dropped;

uint32_t LeakboundSiteFor(uintptr_t pc) {
  uint64_t hash = (uint64_t)pc * 0x9E3779B97F4A7C15ull;
  size_t slot = (size_t)(hash >> (64 - kSiteBits));
  for (int probe = 0; probe < kSiteProbe; ++probe, slot = (slot + 1) & ((1u << kSiteBits) - 1)) {
    uintptr_t seen = atomic_load_explicit(&g_sites[slot].pc, memory_order_relaxed);
    if (seen == pc) return (uint32_t)slot + 1;
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
    Site* s = &g_sites[i];
    uintptr_t pc = atomic_load_explicit(&s->pc, memory_order_relaxed);
    if (pc == 0) continue;
    int64_t bytes = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    int64_t allocations = atomic_load_explicit(&s->allocations, memory_order_relaxed);
    if (s->named && bytes == s->sent_bytes && allocations == s->sent_allocations) continue;
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
  }
}
