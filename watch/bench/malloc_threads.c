/* The multi-threaded loop of watch/bench/overhead.sh: 4 threads, each N/4 pairs of malloc + free
 * of varying small sizes (each thread on its own counter slot and its own call-site books); no
 * step markers (run under `--interval`). Prints ns per pair (wall time / N).
 *   malloc_threads [N] [keep]
 * keep (a test's, watch.interval_threads_site_census): meanwhile the main thread keeps a 64-byte
 * block every 2 ms at a line of its own, a leak beside the loop, so that the heap holds aged
 * survivors and watch gives the loop's call site a census too. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kThreads = 4 };

static long g_pairs_each;
static atomic_int g_running;

static void* Loop(void* arg) {
  const size_t offset = (size_t)arg;
  void* volatile sink;
  for (long i = 0; i < g_pairs_each; ++i) {
    sink = malloc(16 + ((size_t)i + offset) % 256);
    free(sink);
  }
  atomic_fetch_sub(&g_running, 1);
  return NULL;
}

int main(int argc, char** argv) {
  const long pairs = argc > 1 ? atol(argv[1]) : 20000000;
  const int keep = argc > 2 && strcmp(argv[2], "keep") == 0;
  g_pairs_each = pairs / kThreads;
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  pthread_t threads[kThreads];
  atomic_store(&g_running, kThreads);
  for (int t = 0; t < kThreads; ++t) pthread_create(&threads[t], NULL, Loop, (void*)(size_t)(t * 64));
  void** kept = NULL; /* the kept blocks, chained: each holds the one kept before it */
  while (keep && atomic_load(&g_running) > 0) {
    void** block = malloc(64);
    if (!block) break;
    *block = kept;
    kept = block;
    nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
  }
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
  printf("%.2f ns per malloc/free pair (wall, %d threads)%s\n", ns / (double)pairs, kThreads,
         keep ? ", keeping a block every 2 ms" : "");
  while (kept) {
    void** before = *kept;
    free(kept);
    kept = before;
  }
  return 0;
}
