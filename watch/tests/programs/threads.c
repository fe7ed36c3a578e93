/* Four worker threads allocate at 160 call sites each step and free each other's blocks (the
 * preload's per-thread call-site books fold entries into the sites when two sites share one,
 * and a block freed by another thread goes into that thread's books); in `leak` mode each worker
 * also keeps 32 bytes a step at one line. The main thread marks a step once every worker is done
 * (a quiet point: the census and the call sites are exact there).
 * Usage: watch_threads clean|leak STEPS */
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

#define C(k) \
  case k:    \
    p = malloc(16 + (k));    \
    break;
#define C10(k) C(k##0) C(k##1) C(k##2) C(k##3) C(k##4) C(k##5) C(k##6) C(k##7) C(k##8) C(k##9)

/* 160 distinct call sites (a return address each: the code after the switch keeps every call
 * out of tail position). */
static __attribute__((noinline)) void* AllocAt(unsigned site) {
  void* p = NULL;
  switch (site % 160) {
    C(0) C(1) C(2) C(3) C(4) C(5) C(6) C(7) C(8) C(9)
    C10(1) C10(2) C10(3) C10(4) C10(5) C10(6) C10(7) C10(8) C10(9) C10(10) C10(11) C10(12)
    C10(13) C10(14) C10(15)
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
  if (argc != 3) {
    fprintf(stderr, "usage: %s clean|leak STEPS\n", argv[0]);
    return 2;
  }
  g_leak = strcmp(argv[1], "leak") == 0;
  g_steps = atoi(argv[2]);
  if (g_steps <= 0 || g_steps > kMaxSteps) return 2;
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
