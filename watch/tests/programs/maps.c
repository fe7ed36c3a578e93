/* Anonymous mappings under watch (host.mapped_bytes): each step maps 3 pages, punches a hole in
 * the middle one (the mapping splits), grows the tail with mremap (it may move), then unmaps the
 * rest; four threads unmap one 2-page mapping at the same moment (each munmap succeeds, and the
 * books must take it off once). In `leak` mode each step also keeps one 4 KiB mapping: the
 * counter must grow exactly 4096 bytes a step, and stay exactly flat in `clean` mode. In `full`
 * mode it first keeps 4,500 one-page mappings (past the 4,096 of the preload's mapping table),
 * then steps as `clean`: the report must say how many mappings went uncounted.
 * Usage: watch_maps clean|leak|full STEPS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "leakbound/watch/step.h"

enum { kRacers = 4 };
static pthread_barrier_t g_start, g_done;
static void* _Atomic g_shared;
static int g_steps;
static long g_page;

static void* Map(size_t length) {
  void* p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("watch_maps: mmap");
    exit(3);
  }
  memset(p, 1, length);
  return p;
}

static void* Racer(void* unused) {
  (void)unused;
  for (int step = 0; step < g_steps; ++step) {
    pthread_barrier_wait(&g_start);
    munmap(g_shared, 2 * (size_t)g_page); /* every racer: the first one unmaps, the rest no-op */
    pthread_barrier_wait(&g_done);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "clean") != 0 && strcmp(argv[1], "leak") != 0 &&
                    strcmp(argv[1], "full") != 0)) {
    fprintf(stderr, "usage: %s clean|leak|full STEPS\n", argv[0]);
    return 2;
  }
  const int leak = strcmp(argv[1], "leak") == 0;
  g_steps = atoi(argv[2]);
  if (g_steps <= 0) return 2;
  g_page = sysconf(_SC_PAGESIZE);
  const size_t page = (size_t)g_page;
  if (strcmp(argv[1], "full") == 0) {
    for (int i = 0; i < 4500; ++i) Map(page); /* kept to the end */
  }
  pthread_barrier_init(&g_start, NULL, kRacers + 1);
  pthread_barrier_init(&g_done, NULL, kRacers + 1);
  pthread_t racers[kRacers];
  for (int t = 0; t < kRacers; ++t) pthread_create(&racers[t], NULL, Racer, NULL);
  for (int step = 0; step < g_steps; ++step) {
    char* three = Map(3 * page);
    munmap(three + page, page);                                   /* a hole: two mappings */
    char* tail = mremap(three + 2 * page, page, 4 * page, MREMAP_MAYMOVE);
    if (tail == MAP_FAILED) {
      perror("watch_maps: mremap");
      return 3;
    }
    tail[4 * page - 1] = 2;
    munmap(three, page);
    munmap(tail, 4 * page);
    g_shared = Map(2 * page);
    pthread_barrier_wait(&g_start);
    pthread_barrier_wait(&g_done);
    if (leak) Map(4096 > page ? 4096 : page); /* kept: never unmapped */
    leakbound_watch_step();
  }
  for (int t = 0; t < kRacers; ++t) pthread_join(racers[t], NULL);
  return 0;
}
