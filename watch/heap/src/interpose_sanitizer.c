/* Front end of the host-heap interposer for ASan / TSan builds: the sanitizer owns malloc, so a
 * malloc defined here would never be called. Instead its allocator hooks feed the same table
 * and counters (requested sizes: the sanitizers pass the user size to the malloc hook). */
#include <stddef.h>

#include "heap_core.h"

/* From <sanitizer/allocator_interface.h> (not shipped with every compiler); weak so that a
 * runtime without them leaves the heap "unavailable" instead of failing to load. */
extern int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                         size_t),
                                                     void (*free_hook)(const volatile void*))
    __attribute__((weak));

static void OnSanitizerMalloc(const volatile void* block, size_t size) {
  if (block) LeakboundHeapOnAlloc((const void*)block, size);
}

/* Called before the block is released (quarantined), so its address cannot be reused yet. */
static void OnSanitizerFree(const volatile void* block) {
  if (block) LeakboundHeapOnFree((const void*)block);
}

__attribute__((constructor(102))) static void InitSanitizerFrontEnd(void) {
  if (!__sanitizer_install_malloc_and_free_hooks) {
    LeakboundHeapSetFrontEnd("sanitizer hooks",
                             "unavailable: the sanitizer runtime has no "
                             "__sanitizer_install_malloc_and_free_hooks");
  } else if (__sanitizer_install_malloc_and_free_hooks(OnSanitizerMalloc, OnSanitizerFree) == 0) {
    LeakboundHeapSetFrontEnd("sanitizer hooks",
                             "unavailable: the sanitizer's hook slots are all taken");
  } else {
    LeakboundHeapSetFrontEnd("sanitizer hooks", NULL);
  }
}
