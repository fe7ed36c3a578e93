/* More live threads than the heap has counter slots (1,023 of their own; the rest share one):
 * 1,100 threads, each step each allocates and frees a few blocks (some freed by the next
 * thread), and in `leak` mode each keeps 8 bytes a step. The heap's counters must stay exact
 * for the threads on the shared slot too: exactly 8,800 B/step leaking, flat clean.
 * churn-clean / churn-leak: a long run of short threads instead, 32 started and joined each step
 * (64,000 thread lifetimes in 2,000 steps: the heap's slots are given back and reused over and
 * over), each freeing a block the main thread made for it and handing one back, and in
 * churn-leak keeping 8 bytes: exactly 256 B/step leaking, flat clean.
 * Usage: watch_many_threads clean|leak|churn-clean|churn-leak STEPS */
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

enum { kChurn = 32 };
static void* g_given[kChurn];
static void* g_back[kChurn];

static void* Short(void* arg) {
  const int t = (int)(intptr_t)arg;
  free(g_given[t]);
  g_back[t] = malloc(64 + 8 * (size_t)t);
  if (g_leak && !malloc(8)) abort(); /* kept: nothing points to it */
  return NULL;
}

static int Churn(int steps) {
  for (int step = 0; step < steps; ++step) {
    pthread_t threads[kChurn];
    for (int t = 0; t < kChurn; ++t) {
      g_given[t] = malloc(40);
      if (pthread_create(&threads[t], NULL, Short, (void*)(intptr_t)t) != 0) {
        fprintf(stderr, "watch_many_threads: could not start a thread at step %d\n", step);
        return 3;
      }
    }
    for (int t = 0; t < kChurn; ++t) pthread_join(threads[t], NULL);
    for (int t = 0; t < kChurn; ++t) free(g_back[t]);
    leakbound_watch_step(); /* a quiet point: every short thread has ended */
  }
  return 0;
}

int main(int argc, char** argv) {
  const int churn = argc == 3 && strncmp(argv[1], "churn-", 6) == 0;
  const char* kind = churn ? argv[1] + 6 : argc == 3 ? argv[1] : "";
  if (strcmp(kind, "clean") != 0 && strcmp(kind, "leak") != 0) {
    fprintf(stderr, "usage: %s clean|leak|churn-clean|churn-leak STEPS (at most %d without churn)\n",
            argv[0], kMaxSteps);
    return 2;
  }
  g_leak = strcmp(kind, "leak") == 0;
  if (churn) return atoi(argv[2]) > 0 ? Churn(atoi(argv[2])) : 2;
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
