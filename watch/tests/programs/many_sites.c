/* More call sites than the hot part of the preload's site table holds (32,768): each step
 * allocates 64 bytes at 33,792 distinct calls (macro-repeated, each its own return address) and
 * frees them; in `leak` mode it also keeps 40 bytes a step at one line, claimed after them (in
 * the table's overflow part). Past the whole table: watch_jit_sites many.
 * Usage: watch_many_sites clean|leak STEPS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakbound/watch/step.h"

#define R4(x) x x x x
#define SITE held[n++] = malloc(64);
enum { kSites = 32768 + 1024 };
static void* held[kSites];

static int Allocate(void) {
  int n = 0;
  R4(R4(R4(R4(R4(R4(R4(SITE)))))))  /* 16,384 */
  R4(R4(R4(R4(R4(R4(R4(SITE)))))))  /* 16,384 */
  R4(R4(R4(R4(R4(SITE)))))          /* 1,024 */
  for (int i = 0; i < n; ++i) {
    if (!held[i]) return 3;
    free(held[i]);
  }
  return n == kSites ? 0 : 3;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "clean") != 0 && strcmp(argv[1], "leak") != 0)) {
    fprintf(stderr, "usage: %s clean|leak STEPS\n", argv[0]);
    return 2;
  }
  const int leak = strcmp(argv[1], "leak") == 0;
  const int steps = atoi(argv[2]);
  static void* kept[100000];
  if (steps <= 0 || steps > 100000) return 2;
  for (int step = 0; step < steps; ++step) {
    if (Allocate() != 0) return 3;
    if (leak) kept[step] = malloc(40); /* the leak: 40 B a step */
    leakbound_watch_step();
  }
  volatile void* sink = kept[steps - 1];
  (void)sink;
  return 0;
}
