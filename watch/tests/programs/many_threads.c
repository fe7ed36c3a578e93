/* More live threads than the heap has counter slots (1,023 of their own; the rest share one):
 * 1,100 threads, each step each allocates and frees a few blocks (some freed by the next
 * thread), and in `leak` mode each keeps 8 bytes a step. The heap's counters must stay exact
 * for the threads on the shared slot too: exactly 8,800 B/step leaking, flat clean.
 * Usage: watch_many_threads clean|leak STEPS */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakbound/watch/step.h"

enum { kThreads = 1100, kMaxSteps = 1000 };
static pthread_barrier_t g_start, g_done;
static int g_steps, g_leak;
static void* _Atomic g_handoff[kThreads];
static void* g_kept[kThreads][kMaxSteps];

static void* Worker(void* arg) {
  const int t = (int)(intptr_t)arg;
  for (int step = 0; step < g_steps; ++step) {
    pthread_barrier_wait(&g_start);
    for (int i = 0; i < 4; ++i) free(malloc(32 + 16 * (size_t)i));
    g_handoff[t] = malloc(48); /* freed by the next thread, after the barrier */
    if (g_leak) g_kept[t][step] = malloc(8);
    pthread_barrier_wait(&g_done);
    pthread_barrier_wait(&g_start);
    free(g_handoff[(t + 1) % kThreads]);
    pthread_barrier_wait(&g_done);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "clean") != 0 && strcmp(argv[1], "leak") != 0)) {
    fprintf(stderr, "usage: %s clean|leak STEPS (at most %d)\n", argv[0], kMaxSteps);
    return 2;
  }
  g_leak = strcmp(argv[1], "leak") == 0;
  g_steps = atoi(argv[2]);
  if (g_steps <= 0 || g_steps > kMaxSteps) return 2;
  pthread_barrier_init(&g_start, NULL, kThreads + 1);
  pthread_barrier_init(&g_done, NULL, kThreads + 1);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  static pthread_t threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    if (pthread_create(&threads[t], &attr, Worker, (void*)(intptr_t)t) != 0) {
      fprintf(stderr, "watch_many_threads: could not start thread %d\n", t);
      return 3;
    }
  }
  for (int step = 0; step < g_steps; ++step) {
    for (int phase = 0; phase < 2; ++phase) {
      pthread_barrier_wait(&g_start);
      pthread_barrier_wait(&g_done);
    }
    leakbound_watch_step(); /* a quiet point: every thread waits at the barrier */
  }
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  uintptr_t sink = 0;
  for (int t = 0; t < kThreads; ++t) sink ^= (uintptr_t)g_kept[t][g_steps - 1];
  return sink == 1 ? 4 : 0;
}
