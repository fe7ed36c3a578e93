/* Four worker threads allocate at 160 call sites each step (or SITES, up to 1,200) and free each
 * other's blocks (the preload's per-thread call-site books fold entries into the sites when two
 * sites share one, and a block freed by another thread goes into that thread's books; with
 * 1,200 sites a step folds more entries than the marker's rings hold, and its visits are full); in `leak` mode each worker
 * also keeps 32 bytes a step at one line. The main thread marks a step once every worker is done
 * (a quiet point: the census and the call sites are exact there).
 * Usage: watch_threads clean|leak STEPS [SITES] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakbound/watch/step.h"

enum { kWorkers = 4, kPerStep = 2000, kMaxSteps = 4096 };

static pthread_barrier_t g_start, g_done;
static int g_steps;
static int g_leak;
static void* g_blocks[kWorkers][kPerStep];
static void* g_kept[kWorkers][kMaxSteps];
static volatile uintptr_t g_sink;

/* kMaxSites distinct call sites (a return address each: the code after the switch keeps every
 * call out of tail position); the case labels are __COUNTER__'s 0, 1, 2, ... */
#define C case __COUNTER__: p = malloc(16 + (site & 63)); break;
#define C10 C C C C C C C C C C
#define C100 C10 C10 C10 C10 C10 C10 C10 C10 C10 C10
enum { kMaxSites = 1200 };
static int g_sites = 160;

static __attribute__((noinline)) void* AllocAt(unsigned site) {
  void* p = NULL;
  switch (site % (unsigned)g_sites) {
    C100 C100 C100 C100 C100 C100 C100 C100 C100 C100 C100 C100
  }
  g_sink ^= (uintptr_t)p;
  return p;
}

static void* Worker(void* arg) {
  const int me = (int)(intptr_t)arg;
  for (int step = 0; step < g_steps; ++step) {
    pthread_barrier_wait(&g_start);
    /* The blocks the next worker allocated last step: freed here, on another thread. */
    void** theirs = g_blocks[(me + 1) % kWorkers];
    for (int i = 0; i < kPerStep; ++i) {
      free(theirs[i]);
      theirs[i] = NULL;
    }
    pthread_barrier_wait(&g_start);
    for (int i = 0; i < kPerStep; ++i) g_blocks[me][i] = AllocAt((unsigned)(i * 7 + me));
    if (g_leak) g_kept[me][step] = malloc(32); /* the leak: 32 B per worker per step */
    pthread_barrier_wait(&g_done);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s clean|leak STEPS [SITES, default 160, at most %d]\n", argv[0],
            kMaxSites);
    return 2;
  }
  g_leak = strcmp(argv[1], "leak") == 0;
  g_steps = atoi(argv[2]);
  if (argc == 4) g_sites = atoi(argv[3]);
  if (g_steps <= 0 || g_steps > kMaxSteps || g_sites <= 0 || g_sites > kMaxSites) return 2;
  pthread_barrier_init(&g_start, NULL, kWorkers + 1);
  pthread_barrier_init(&g_done, NULL, kWorkers + 1);
  pthread_t threads[kWorkers];
  for (int t = 0; t < kWorkers; ++t) pthread_create(&threads[t], NULL, Worker, (void*)(intptr_t)t);
  for (int step = 0; step < g_steps; ++step) {
    pthread_barrier_wait(&g_start);
    pthread_barrier_wait(&g_start);
    pthread_barrier_wait(&g_done);
    leakbound_watch_step();
  }
  for (int t = 0; t < kWorkers; ++t) pthread_join(threads[t], NULL);
  /* Read what was kept: a static array that is only written is dropped by the compiler, and
   * the malloc with it. */
  for (int t = 0; t < kWorkers; ++t)
    for (int step = 0; step < g_steps; ++step) g_sink ^= (uintptr_t)g_kept[t][step];
  return 0;
}
