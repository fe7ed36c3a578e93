/* Seeded program families for the census property suite (census_family.h). Every class keeps its
 * bookkeeping in memory allocated when it is made, so what a step allocates is the class's own
 * behaviour and nothing else. */
#define _GNU_SOURCE 1
#include "census_family.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  kWs, kWs4, kSawtooth, kLru, kLazy, kGrowbuf, /* bounded */
  kSteady, kPeriodic, kMaskedEarly, kMaskedLate, kLeakWs, kLeakThread, /* leaks */
  kClassCount,
  kPower /* census_family_make_power */
};

static const char *const kNames[] = {"ws",       "ws4",          "sawtooth",    "lru",
                                     "lazy",     "growbuf",      "steady",      "periodic",
                                     "masked_early", "masked_late", "leak_ws", "leak_thread",
                                     NULL};

enum { kWorkers = 4, kLruMax = 512, kDatasetMax = 4096 };

typedef struct Worker {
  census_family *family;
  int index;
  uint64_t rng;
  void *held; /* the worker's working set, held across steps */
} Worker;

struct census_family {
  int cls;
  int steps;
  uint64_t rng;
  char description[160];
  /* working set */
  size_t ws_max;
  void *held;
  /* leaks: every leaked block, freed only by census_family_free */
  void **kept;
  int kept_count, kept_cap;
  size_t leak_bytes; /* per firing */
  int leak_period;   /* steps between firings */
  int leak_phase;
  double power_rate; /* kPower: bytes a step */
  double power_owed;
  /* sawtooth */
  void **saw;
  int saw_count, saw_cap, saw_period;
  /* masked: a start-up cache dropped at drop_step */
  void *cache;
  int drop_step;
  /* lru: entries[i] holds key keys[i]; order by last use (stamp) */
  int lru_capacity, lru_keys, lru_accesses;
  void *lru_entry[kLruMax];
  int lru_key[kLruMax];
  long lru_stamp[kLruMax];
  long lru_clock;
  /* lazy */
  void *lazy[8];
  int lazy_count;
  /* growbuf: a dataset of input sizes, shuffled each epoch */
  size_t dataset[kDatasetMax];
  int dataset_size, dataset_at;
  void *grow;
  size_t grow_capacity;
  /* threads */
  pthread_t threads[kWorkers];
  Worker workers[kWorkers];
  int thread_count;
  pthread_barrier_t start, done;
  int stopping;
};

static uint64_t Next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static uint64_t Between(uint64_t *state, uint64_t lo, uint64_t hi) {
  return lo + Next(state) % (hi - lo + 1);
}

static void *Touch(void *block, size_t size) {
  if (block && size) memset(block, 0x5a, size < 64 ? size : 64);
  return block;
}

/* One buffer of random size held until the next call frees it, plus a few transient ones. */
static void *WorkingSet(uint64_t *rng, void *held, size_t max) {
  free(held);
  for (int i = 0, n = (int)Between(rng, 0, 4); i < n; ++i) {
    size_t size = (size_t)Between(rng, 1, 4096);
    free(Touch(malloc(size), size));
  }
  size_t size = (size_t)Between(rng, 1, max);
  return Touch(malloc(size), size);
}

static void Keep(census_family *f, size_t size) {
  if (f->kept_count < f->kept_cap) f->kept[f->kept_count++] = Touch(malloc(size), size);
}

static void *WorkerMain(void *arg) {
  Worker *w = (Worker *)arg;
  census_family *f = w->family;
  for (;;) {
    pthread_barrier_wait(&f->start);
    if (f->stopping) break;
    if (f->cls == kWs4) {
      w->held = WorkingSet(&w->rng, w->held, f->ws_max);
    } else { /* kLeakThread: the background thread leaks; the main thread's work is bounded */
      Keep(f, f->leak_bytes);
    }
    pthread_barrier_wait(&f->done);
  }
  free(w->held);
  return NULL;
}

static void StartThreads(census_family *f, int count) {
  f->thread_count = count;
  pthread_barrier_init(&f->start, NULL, (unsigned)count + 1);
  pthread_barrier_init(&f->done, NULL, (unsigned)count + 1);
  for (int i = 0; i < count; ++i) {
    f->workers[i].family = f;
    f->workers[i].index = i;
    f->workers[i].rng = Next(&f->rng);
    pthread_create(&f->threads[i], NULL, WorkerMain, &f->workers[i]);
  }
}

static void LruAccess(census_family *f) {
  const int key = (int)Between(&f->rng, 0, (uint64_t)f->lru_keys - 1);
  int victim = -1, free_slot = -1;
  for (int i = 0; i < f->lru_capacity; ++i) {
    if (f->lru_entry[i] && f->lru_key[i] == key) {
      f->lru_stamp[i] = ++f->lru_clock; /* a hit refreshes the entry, nothing is allocated */
      return;
    }
    if (!f->lru_entry[i]) {
      if (free_slot < 0) free_slot = i;
    } else if (victim < 0 || f->lru_stamp[i] < f->lru_stamp[victim]) {
      victim = i;
    }
  }
  const int slot = free_slot >= 0 ? free_slot : victim;
  free(f->lru_entry[slot]);
  const size_t size = 64 + (size_t)(key * 37 % 960);
  f->lru_entry[slot] = Touch(malloc(size), size);
  f->lru_key[slot] = key;
  f->lru_stamp[slot] = ++f->lru_clock;
}

const char *const *census_family_classes(void) { return kNames; }

static int ClassOf(const char *name) {
  for (int i = 0; kNames[i]; ++i)
    if (strcmp(kNames[i], name) == 0) return i;
  return -1;
}

int census_family_leaks(const char *name) {
  const int cls = ClassOf(name);
  return cls < 0 ? -1 : cls >= kSteady;
}

census_family *census_family_make(const char *name, uint64_t seed, int steps) {
  const int cls = ClassOf(name);
  if (cls < 0 || steps < 1) return NULL;
  census_family *f = (census_family *)calloc(1, sizeof *f);
  if (!f) return NULL;
  f->cls = cls;
  f->steps = steps;
  f->rng = seed * 0x2545F4914F6CDD1Dull + (uint64_t)cls;
  /* Room for a leak that outlives the planned steps (a recorder may run more: warm-up detection,
   * confirmation blocks). */
  f->kept_cap = 8 * steps + 4096;
  f->kept = (void **)calloc((size_t)f->kept_cap, sizeof(void *));
  uint64_t *r = &f->rng;
  switch (cls) {
    case kWs:
    case kWs4:
      f->ws_max = (size_t)Between(r, 1, 256) * 1024;
      if (cls == kWs4) StartThreads(f, kWorkers);
      snprintf(f->description, sizeof f->description, "%s working set up to %zu KiB",
               cls == kWs4 ? "4 threads, each a" : "a", f->ws_max / 1024);
      break;
    case kSawtooth:
      f->saw_period = (int)Between(r, 4, (uint64_t)(steps / 16 > 4 ? steps / 16 : 4));
      f->saw_cap = f->saw_period * 4 + 4;
      f->saw = (void **)calloc((size_t)f->saw_cap, sizeof(void *));
      f->ws_max = (size_t)Between(r, 1, 100) * 1024;
      snprintf(f->description, sizeof f->description,
               "flushes a list every %d steps, working set up to %zu KiB", f->saw_period,
               f->ws_max / 1024);
      break;
    case kLru:
      /* Misses at least 3 in 4: an entry lives about capacity / accesses steps, well inside a
       * block (the rule's assumption; a slower cache is measured in verdict_test.cc). */
      f->lru_capacity = (int)Between(r, 8, 32);
      f->lru_keys = f->lru_capacity * (int)Between(r, 4, 8);
      f->lru_accesses = (int)Between(r, 2, 4);
      snprintf(f->description, sizeof f->description, "LRU of %d entries over %d keys, %d a step",
               f->lru_capacity, f->lru_keys, f->lru_accesses);
      break;
    case kLazy:
      f->lazy_count = (int)Between(r, 1, 8);
      f->ws_max = (size_t)Between(r, 1, 100) * 1024;
      snprintf(f->description, sizeof f->description,
               "%d lazily made buffers in the first steps, working set up to %zu KiB",
               f->lazy_count, f->ws_max / 1024);
      break;
    case kGrowbuf: {
      const int most = steps / 8 < kDatasetMax ? steps / 8 : kDatasetMax;
      f->dataset_size = (int)Between(r, 4, (uint64_t)(most > 4 ? most : 4));
      for (int i = 0; i < f->dataset_size; ++i) f->dataset[i] = (size_t)Between(r, 1, 256 * 1024);
      f->dataset_at = f->dataset_size; /* shuffle at the first step */
      snprintf(f->description, sizeof f->description,
               "a grow-only buffer sized by the largest of %d inputs (shuffled epochs)",
               f->dataset_size);
      break;
    }
    case kSteady:
      f->leak_bytes = (size_t)Between(r, 1, 64);
      f->leak_period = 1;
      f->ws_max = (size_t)Between(r, 1, 16) * 1024;
      snprintf(f->description, sizeof f->description, "leaks %zu B/step", f->leak_bytes);
      break;
    case kPeriodic:
      /* Up to an eighth of the run: a quarter to a third of the window a recorder judges. */
      f->leak_period = (int)Between(r, 2, (uint64_t)(steps / 8 > 2 ? steps / 8 : 2));
      /* At least 1 B/step on average (steady's lower end; the floor is 0.5 B/step): a firing of
       * 16-1024 B, and at least one byte per step of its period. */
      f->leak_bytes = (size_t)Between(r, (uint64_t)(f->leak_period > 16 ? f->leak_period : 16), 1024);
      f->leak_phase = (int)Between(r, 0, (uint64_t)f->leak_period - 1);
      f->ws_max = (size_t)Between(r, 1, 16) * 1024;
      snprintf(f->description, sizeof f->description, "leaks %zu B every %d steps",
               f->leak_bytes, f->leak_period);
      break;
    case kMaskedEarly:
    case kMaskedLate:
      f->leak_bytes = (size_t)Between(r, 16, 64);
      f->leak_period = 1;
      f->cache = Touch(malloc(1 << 20), 1 << 20);
      f->drop_step = cls == kMaskedEarly ? (int)Between(r, (uint64_t)steps / 4, (uint64_t)steps / 3)
                                         : (int)Between(r, (uint64_t)steps * 3 / 4,
                                                        (uint64_t)steps * 9 / 10);
      snprintf(f->description, sizeof f->description,
               "leaks %zu B/step, drops a 1 MiB start-up cache at step %d", f->leak_bytes,
               f->drop_step);
      break;
    case kLeakWs:
      f->leak_bytes = (size_t)Between(r, 16, 64);
      f->leak_period = 1;
      f->ws_max = (size_t)Between(r, 1, 100) * 1024;
      snprintf(f->description, sizeof f->description,
               "leaks %zu B/step under a working set up to %zu KiB", f->leak_bytes,
               f->ws_max / 1024);
      break;
    case kLeakThread:
      f->leak_bytes = (size_t)Between(r, 16, 64);
      f->ws_max = (size_t)Between(r, 1, 16) * 1024;
      StartThreads(f, 1);
      snprintf(f->description, sizeof f->description,
               "a background thread leaks %zu B/step", f->leak_bytes);
      break;
  }
  return f;
}

void census_family_step(census_family *f, int step) {
  uint64_t *r = &f->rng;
  switch (f->cls) {
    case kWs:
      f->held = WorkingSet(r, f->held, f->ws_max);
      break;
    case kWs4:
    case kLeakThread:
      pthread_barrier_wait(&f->start);
      pthread_barrier_wait(&f->done);
      if (f->cls == kLeakThread) f->held = WorkingSet(r, f->held, f->ws_max);
      break;
    case kSawtooth:
      for (int i = 0, n = (int)Between(r, 1, 4); i < n && f->saw_count < f->saw_cap; ++i) {
        const size_t size = (size_t)Between(r, 16, 256);
        f->saw[f->saw_count++] = Touch(malloc(size), size);
      }
      if ((step + 1) % f->saw_period == 0) {
        for (int i = 0; i < f->saw_count; ++i) free(f->saw[i]);
        f->saw_count = 0;
      }
      f->held = WorkingSet(r, f->held, f->ws_max);
      break;
    case kLru:
      for (int i = 0; i < f->lru_accesses; ++i) LruAccess(f);
      break;
    case kLazy:
      if (step < f->lazy_count && step < 8) {
        const size_t size = (size_t)Between(r, 1, 1024) * 1024;
        f->lazy[step] = Touch(malloc(size), size);
      }
      f->held = WorkingSet(r, f->held, f->ws_max);
      break;
    case kGrowbuf: {
      if (f->dataset_at == f->dataset_size) { /* a new epoch: shuffle the inputs */
        for (int i = f->dataset_size - 1; i > 0; --i) {
          const int j = (int)Between(r, 0, (uint64_t)i);
          const size_t t = f->dataset[i];
          f->dataset[i] = f->dataset[j];
          f->dataset[j] = t;
        }
        f->dataset_at = 0;
      }
      const size_t input = f->dataset[f->dataset_at++];
      if (input > f->grow_capacity) {
        void *grown = realloc(f->grow, input);
        if (grown) {
          f->grow = grown;
          f->grow_capacity = input;
        }
      }
      Touch(f->grow, f->grow_capacity);
      free(Touch(malloc(input), input)); /* the step's own scratch */
      break;
    }
    case kSteady:
    case kLeakWs:
      Keep(f, f->leak_bytes);
      f->held = WorkingSet(r, f->held, f->ws_max);
      break;
    case kPeriodic:
      if (step % f->leak_period == f->leak_phase) Keep(f, f->leak_bytes);
      f->held = WorkingSet(r, f->held, f->ws_max);
      break;
    case kPower:
      f->power_owed += f->power_rate;
      if (f->power_owed >= 1) {
        const size_t bytes = (size_t)f->power_owed;
        Keep(f, bytes);
        f->power_owed -= (double)bytes;
      }
      if (f->ws_max > 0) f->held = WorkingSet(r, f->held, f->ws_max);
      break;
    case kMaskedEarly:
    case kMaskedLate:
      Keep(f, f->leak_bytes);
      if (step == f->drop_step) {
        free(f->cache);
        f->cache = NULL;
      }
      break;
  }
}

census_family *census_family_make_power(uint64_t seed, int steps, double rate, int noise_kib) {
  census_family *f = census_family_make("ws", seed, steps);
  if (!f) return NULL;
  f->cls = kPower;
  f->power_rate = rate;
  f->ws_max = noise_kib > 0 ? (size_t)noise_kib * 1024 : 0;
  snprintf(f->description, sizeof f->description, "leaks %.3g B/step under a working set up to %d KiB",
           rate, noise_kib);
  return f;
}

const char *census_family_describe(const census_family *f) { return f->description; }

void census_family_free(census_family *f) {
  if (!f) return;
  if (f->thread_count > 0) {
    f->stopping = 1;
    pthread_barrier_wait(&f->start);
    for (int i = 0; i < f->thread_count; ++i) pthread_join(f->threads[i], NULL);
    pthread_barrier_destroy(&f->start);
    pthread_barrier_destroy(&f->done);
  }
  for (int i = 0; i < f->kept_count; ++i) free(f->kept[i]);
  free(f->kept);
  for (int i = 0; i < f->saw_count; ++i) free(f->saw[i]);
  free(f->saw);
  for (int i = 0; i < kLruMax; ++i) free(f->lru_entry[i]);
  for (int i = 0; i < 8; ++i) free(f->lazy[i]);
  free(f->grow);
  free(f->cache);
  free(f->held);
  free(f);
}
