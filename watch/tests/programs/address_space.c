/* Under an address-space limit (ulimit -v), allocates 100 MiB blocks (each also followed by a
 * thousand small ones, which keep the heap's own records busy) until malloc fails, marking a step
 * per block; prints how many it got. Bare and under watch it must get the same number: watching
 * must not change when a program runs out of memory.
 * Usage: watch_address_space MAX_BLOCKS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakbound/watch/step.h"

int main(int argc, char** argv) {
  const int most = argc > 1 ? atoi(argv[1]) : 64;
  int got = 0;
  static void* small[64][1000];
  while (got < most && got < 64) {
    char* block = malloc((size_t)100 << 20);
    if (!block) break;
    memset(block, 1, 4096); /* touched a little: address space, not memory, runs out */
    for (int i = 0; i < 1000; ++i) small[got][i] = malloc(48);
    ++got;
    leakbound_watch_step();
  }
  /* Read what was kept (a static array only written is dropped by the compiler, and the mallocs). */
  size_t kept = 0;
  for (int b = 0; b < got; ++b)
    for (int i = 0; i < 1000; ++i) kept += small[b][i] != NULL;
  printf("blocks %d\n", got);
  if (kept != (size_t)got * 1000) fprintf(stderr, "%zu small blocks of %d failed\n", (size_t)got * 1000 - kept, got * 1000);
  return 0;
}
