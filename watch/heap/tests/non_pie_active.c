/* A non-PIE executable that takes malloc's address: there &malloc is the executable's canonical PLT
 * stub (as in Debian's /usr/bin/python3), not libleakbound_heap's definition. The interposer must
 * still say "active" (it checks by effect) and count through that pointer. Exit 0 if so. */
#include <stdio.h>
#include <stdlib.h>

#include "leakbound/watch/heap.h"

void *(*volatile g_malloc)(size_t);

int main(void) {
  g_malloc = &malloc; /* taken in code: an absolute relocation, so the PLT stub
                         is canonical */
  leakbound_heap_stats before, after;
  leakbound_heap_read(&before);
  void *block = g_malloc(123);
  leakbound_heap_read(&after);
  printf("state: %s, counted %llu bytes\n", leakbound_heap_state(),
         (unsigned long long)(after.live_bytes - before.live_bytes));
  int ok = leakbound_heap_active() && after.live_bytes - before.live_bytes == 123;
  free(block);
  return ok ? 0 : 1;
}
