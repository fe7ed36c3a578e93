/* Internal interfaces of libleakbound_preload.so (the `leakbound watch` preload): the call-site
 * table (sites.c), the mapped-bytes counter (front_end.c) and what the marker (marker.c) needs.
 * Nothing here allocates or locks, except the reporting side named as such. */
#ifndef LEAKBOUND_WATCH_PRELOAD_INTERNAL_H_
#define LEAKBOUND_WATCH_PRELOAD_INTERNAL_H_

#include <stdint.h>

#include "leakbound/watch/channel.h"

#define LB_HIDDEN __attribute__((visibility("hidden")))
#define LB_EXPORT __attribute__((visibility("default")))

/* 1 when call sites are recorded (LEAKBOUND_WATCH_SITES != "0"); set before main. */
extern LB_HIDDEN int g_leakbound_sites_on;

/* Site id (1-based, fits the core's 24-bit slot) of an allocation made from pc; 0 when the
 * table is full (the allocation is still counted, only not attributed). Lock-free. */
LB_HIDDEN uint32_t LeakboundSiteFor(uintptr_t pc);
LB_HIDDEN void LeakboundSiteAdd(uint32_t site, int64_t bytes, int64_t allocations);

/* Reporting side (the marker, never a hook): visits every site whose survivors changed since
 * the previous visit; first_time is 1 the first time a site is visited. Not thread-safe: the
 * marker serialises its callers. */
typedef void (*LeakboundSiteVisitor)(uint32_t site, uintptr_t pc, int64_t bytes,
                                     int64_t allocations, int first_time, void* context);
LB_HIDDEN void LeakboundSitesVisitChanged(LeakboundSiteVisitor visit, void* context);
LB_HIDDEN uint64_t LeakboundSitesDropped(void);

/* Anonymous mmap'd bytes still mapped (front_end.c). */
LB_HIDDEN uint64_t LeakboundMappedBytes(void);

#endif /* LEAKBOUND_WATCH_PRELOAD_INTERNAL_H_ */
