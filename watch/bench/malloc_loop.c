/* The malloc/free-heavy loop of watch/bench/overhead.sh: N pairs of malloc + free of varying
 * small sizes, one step marker per 1000 pairs; prints ns per pair. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "leakbound/watch/step.h"

int main(int argc, char** argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 20000000;
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  void* volatile sink;
  for (long i = 0; i < pairs; ++i) {
    sink = malloc(16 + (size_t)(i & 255));
    free(sink);
    if (i % 1000 == 999) leakbound_watch_step();
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
  printf("%.2f ns per malloc/free pair\n", ns / (double)pairs);
  return 0;
}
