/* Call sites of device memory: the CUDA injection (watch/inject) calls these on the thread that
 * called cudaMalloc (after it) and cudaFree (before it), from a CUPTI callback. The block is
 * booked at the call site of the program's code that called CUDA (the first frame of its stack
 * outside CUDA, CUPTI and leakbound's own libraries), with role LEAKBOUND_WATCH_SITE_DEVICE, in
 * the same site table, census and samples as host blocks and mappings: a device leak's row is
 * named by its line. The counter itself (cupti.device_bytes) stays the CUPTI ledger's. A table of
 * the live device blocks keeps each one's site and birth stamp for its free; a block past its
 * room is not booked (and its free finds nothing); an address allocated again without a free
 * the hooks saw (cudaFreeAsync, cudaDeviceReset) replaces its stale entry. cudaMalloc is rare and
 * slow (a driver call): a backtrace each costs little beside it. Limits (docs/watch.md, "Device
 * memory"): a program with the CUDA runtime linked statically (nvcc's default) has cudart's code
 * in its own image; its frames are passed over only where their symbols are exported. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "heap_core.h"
#include "leakbound/watch/heap.h"
#include "preload_internal.h"

enum { kDeviceBlocks = 4096, kDeviceFrames = 32 };

typedef struct DeviceBlock {
  uint64_t address; /* 0: free entry */
  uint64_t bytes;
  uint32_t site;
  unsigned stamp;
} DeviceBlock;

static DeviceBlock g_blocks[kDeviceBlocks];
static atomic_flag g_blocks_lock = ATOMIC_FLAG_INIT;

static void Lock(void) {
  while (atomic_flag_test_and_set_explicit(&g_blocks_lock, memory_order_acquire)) {
  }
}
static void Unlock(void) { atomic_flag_clear_explicit(&g_blocks_lock, memory_order_release); }

/* Whether pc is in CUDA's, CUPTI's or leakbound's own code (or in none): not the program's. A
 * CUDA runtime function linked into the program itself counts as CUDA's when its symbol is
 * exported (cuda*, __cuda*). */
static int Infrastructure(void* pc) {
  Dl_info info;
  if (dladdr(pc, &info) == 0 || info.dli_fname == NULL) return 1;
  const char* name = strrchr(info.dli_fname, '/');
  name = name ? name + 1 : info.dli_fname;
  if (strncmp(name, "libcuda", 7) == 0 || strncmp(name, "libcupti", 8) == 0 ||
      strncmp(name, "libleakbound_", 13) == 0) {
    return 1;
  }
  return info.dli_sname != NULL &&
         (strncmp(info.dli_sname, "cuda", 4) == 0 || strncmp(info.dli_sname, "__cuda", 6) == 0);
}

/* The return address of the program's call into CUDA: the first frame outside it. */
static uintptr_t ProgramCaller(void) {
  void* frames[kDeviceFrames];
  const int n = backtrace(frames, kDeviceFrames);
  for (int i = 1; i < n; ++i) {
    if (!Infrastructure(frames[i])) return (uintptr_t)frames[i];
  }
  return 0;
}

LB_EXPORT void leakbound_watch_device_alloc(uint64_t address, uint64_t bytes) {
  if (!g_leakbound_sites_on || address == 0 || bytes == 0) return;
  leakbound_heap_exclude_begin(); /* backtrace and dladdr may allocate: not the program's */
  const uintptr_t pc = ProgramCaller();
  const uint32_t site = pc != 0 ? LeakboundSiteFor(pc) : 0;
  leakbound_heap_exclude_end();
  /* Not on the overflow row: it would read as device memory for all the heap sites there. */
  if (site == 0 || site == LeakboundOverflowSite()) return;
  const unsigned stamp = LeakboundHeapEpochNow();
  DeviceBlock stale = {0, 0, 0, 0};
  Lock();
  int kept = -1;
  for (int i = 0; i < kDeviceBlocks; ++i) {
    if (g_blocks[i].address == address) { /* freed behind the hooks, allocated again */
      stale = g_blocks[i];
      kept = i;
      break;
    }
    if (kept < 0 && g_blocks[i].address == 0) kept = i;
  }
  if (kept >= 0) g_blocks[kept] = (DeviceBlock){address, bytes, site, stamp};
  Unlock();
  if (stale.address != 0) {
    LeakboundSiteMapped(stale.site, (uintptr_t)address, -(int64_t)stale.bytes, -1, stale.stamp,
                        LEAKBOUND_WATCH_SITE_DEVICE);
  }
  if (kept >= 0) {
    LeakboundSiteMapped(site, (uintptr_t)address, (int64_t)bytes, 1, stamp,
                        LEAKBOUND_WATCH_SITE_DEVICE);
  }
}

/* A forked child: the parent's device blocks are not its own (CUDA does not survive a fork),
 * and a parent thread may have held the lock. */
void LeakboundDeviceForget(void) {
  memset(g_blocks, 0, sizeof g_blocks);
  atomic_flag_clear(&g_blocks_lock);
}

LB_EXPORT void leakbound_watch_device_free(uint64_t address) {
  if (address == 0) return;
  DeviceBlock found = {0, 0, 0, 0};
  Lock();
  for (int i = 0; i < kDeviceBlocks; ++i) {
    if (g_blocks[i].address == address) {
      found = g_blocks[i];
      g_blocks[i].address = 0;
      break;
    }
  }
  Unlock();
  if (found.address != 0) {
    LeakboundSiteMapped(found.site, (uintptr_t)address, -(int64_t)found.bytes, -1, found.stamp,
                        LEAKBOUND_WATCH_SITE_DEVICE);
  }
}
