/* The multi-threaded loop of watch/bench/overhead.sh: 4 threads, each N/4 pairs of malloc + free
 * of varying small sizes (each thread on its own counter slot and its own call-site books); no
 * step markers (run under `--interval`). Prints ns per pair (wall time / N). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kThreads = 4 };

static long g_pairs_each;

static void* Loop(void* arg) {
  const size_t offset = (size_t)arg;
  void* volatile sink;
  for (long i = 0; i < g_pairs_each; ++i) {
    sink = malloc(16 + ((size_t)i + offset) % 256);
    free(sink);
  }
  return NULL;
}

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? atol(argv[1]) : 20000000;
  g_pairs_each = pairs / kThreads;
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) pthread_create(&threads[t], NULL, Loop, (void*)(size_t)(t * 64));
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
  printf("%.2f ns per malloc/free pair (wall, %d threads)\n", ns / (double)pairs, kThreads);
  return 0;
}
