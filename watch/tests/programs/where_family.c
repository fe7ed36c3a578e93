/* A seeded family of programs for the attribution property suite (watch/tests/where_property.py,
 * docs/watch.md, "Where: measured"): one library call site (strdup's `malloc`, in libc) reached
 * from several lines of this program, of which one keeps what it copies. The seed draws how many
 * callers there are (2-6), which one leaks, how often each is called a step (1-4, the leaking one
 * sometimes less than once a step: every other step, the even ones or the odd ones), how long each of the others holds its copy before freeing it
 * (at once, or up to 8 steps later), the order of the calls and the copies' lengths. The report's
 * first growing row must name the leaking caller's line, not a caller whose copies die.
 *
 * Usage: watch_where_family leak|clean SEED STEPS. Prints "expect LINE" (the leaking line) first.
 * `clean`: the same calls, the "leaking" caller's copies freed 8 steps later too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakbound/watch/step.h"

/* A caller on one line: strdup from there, never a tail call (its frame must stay). */
#define CALLER(n)                                                                              \
  static __attribute__((noinline)) char* Caller##n(const char* text) {                         \
    char* copy = strdup(text); __asm__ volatile("" : : "r"(copy) : "memory"); return copy; }   \
  enum { kLine##n = __LINE__ };
CALLER(0)
CALLER(1)
CALLER(2)
CALLER(3)
CALLER(4)
CALLER(5)

typedef char* (*Caller)(const char*);
static Caller const kCallers[] = {Caller0, Caller1, Caller2, Caller3, Caller4, Caller5};
static const int kLines[] = {kLine0, kLine1, kLine2, kLine3, kLine4, kLine5};
enum { kMostCallers = 6, kMostHold = 8, kRing = kMostHold + 1, kMostCalls = 4 };

static uint64_t g_state;
static uint64_t Next(void) { /* splitmix64 */
  uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int Below(int n) { return (int)(Next() % (uint64_t)n); }

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "leak") != 0 && strcmp(argv[1], "clean") != 0)) {
    fprintf(stderr, "usage: %s leak|clean SEED STEPS\n", argv[0]);
    return 2;
  }
  const int leak = strcmp(argv[1], "leak") == 0;
  g_state = strtoull(argv[2], NULL, 10);
  const int steps = atoi(argv[3]);
  if (steps <= 0 || steps > 1000000) return 2;
  /* What the seed draws. */
  const int callers = 2 + Below(kMostCallers - 1);
  int order[kMostCallers];
  for (int i = 0; i < kMostCallers; ++i) order[i] = i;
  for (int i = kMostCallers - 1; i > 0; --i) { /* which of the six lines take part */
    const int j = Below(i + 1), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  const int leaker = Below(callers); /* an index into order[] */
  int calls[kMostCallers], hold[kMostCallers];
  for (int c = 0; c < callers; ++c) {
    calls[c] = 1 + Below(kMostCalls);
    hold[c] = Below(3) == 0 ? 0 : 1 + Below(kMostHold); /* steps before it frees a copy */
  }
  const int leak_every = 1 + Below(2); /* the leaking caller: every step, or every other one */
  const int leak_phase = Below(leak_every); /* every other one: the even steps or the odd ones */
  calls[leaker] = 1;
  printf("expect %d\n", kLines[order[leaker]]);
  printf("callers %d (lines", callers);
  for (int c = 0; c < callers; ++c) printf(" %d%s", kLines[order[c]], c == leaker ? "*" : "");
  printf("), leaker every %d step(s) from step %d; the others hold", leak_every, leak_phase);
  for (int c = 0; c < callers; ++c) {
    if (c != leaker) printf(" %d x %d steps", calls[c], hold[c]);
  }
  printf("\n");
  fflush(stdout);

  char text[256];
  for (int i = 0; i < (int)sizeof text - 1; ++i) text[i] = (char)('a' + i % 26);
  text[sizeof text - 1] = '\0';
  /* Copies held for later frees: ring[step % kRing][caller][call]. */
  static char* ring[kRing][kMostCallers][kMostCalls];
  char** kept = calloc((size_t)steps, sizeof *kept);
  if (kept == NULL) return 3;
  for (int step = 0; step < steps; ++step) {
    /* The copies whose time is up. */
    char* (*due)[kMostCalls] = ring[step % kRing];
    for (int c = 0; c < kMostCallers; ++c) {
      for (int k = 0; k < kMostCalls; ++k) {
        free(due[c][k]);
        due[c][k] = NULL;
      }
    }
    /* This step's calls, in a drawn order. */
    int pending[kMostCallers * kMostCalls], n = 0;
    for (int c = 0; c < callers; ++c) {
      if (c == leaker && step % leak_every != leak_phase) continue;
      for (int k = 0; k < calls[c]; ++k) pending[n++] = c * kMostCalls + k;
    }
    for (int i = n - 1; i > 0; --i) {
      const int j = Below(i + 1), t = pending[i];
      pending[i] = pending[j];
      pending[j] = t;
    }
    for (int i = 0; i < n; ++i) {
      const int c = pending[i] / kMostCalls, k = pending[i] % kMostCalls;
      char* copy = kCallers[order[c]](text + Below(200)); /* 56-256 bytes */
      if (c == leaker && leak) {
        kept[step] = copy;
      } else {
        const int after = c == leaker ? kMostHold : hold[c];
        if (after == 0) {
          free(copy);
        } else {
          ring[(step + after) % kRing][c][k] = copy;
        }
      }
    }
    leakbound_watch_step();
  }
  for (int step = 0; step < steps; ++step) free(kept[step]);
  free(kept);
  return 0;
}
