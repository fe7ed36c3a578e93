/* Programs the census judge is known to get wrong (docs/verdicts.md, "Failure modes, stated"),
 * kept so that the failure is measured, not described: ci/known-limits.sh runs each under
 * `leakbound watch` and tables the verdicts against the truth. Every mode grows without bound,
 * 64 bytes a step, and marks a step with LEAKBOUND_STEP(); each step also churns a few
 * short-lived blocks, as a real program does.
 *   fifo-growth     a queue: two 64-byte entries in, the oldest out (growth freeing old memory)
 *   realloc-growth  one buffer, realloc'd 64 bytes larger (every byte is in the newest block)
 *   copy-growth     one buffer, copied into one 64 bytes larger and the old one freed
 *   doubling-growth 64 bytes appended to an array that doubles its capacity when full, copied
 *                   into the new one (a std::vector's growth)
 * Usage: known_limits MODE STEPS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakbound/watch/step.h"

typedef struct Entry {
  struct Entry* next;
  char payload[56];
} Entry;

static volatile char g_sink;

static void Churn(unsigned* seed) {
  for (int i = 0; i < 4; ++i) {
    char* transient = malloc(32 + (size_t)(rand_r(seed) % 512));
    transient[0] = 1;
    g_sink = transient[0];
    free(transient);
  }
}

int main(int argc, char** argv) {
  if (argc != 3 || atoi(argv[2]) <= 0) {
    fprintf(stderr,
            "usage: known_limits fifo-growth|realloc-growth|copy-growth|doubling-growth STEPS\n");
    return 2;
  }
  const char* mode = argv[1];
  const int steps = atoi(argv[2]);
  const int fifo = strcmp(mode, "fifo-growth") == 0;
  const int in_place = strcmp(mode, "realloc-growth") == 0;
  const int copied = strcmp(mode, "copy-growth") == 0;
  const int doubling = strcmp(mode, "doubling-growth") == 0;
  if (!fifo && !in_place && !copied && !doubling) {
    fprintf(stderr, "known_limits: unknown mode '%s'\n", mode);
    return 2;
  }
  unsigned seed = 1;
  Entry *head = NULL, *tail = NULL;
  char* buffer = NULL;
  size_t length = 0, capacity = 0;
  for (int step = 0; step < steps; ++step) {
    Churn(&seed);
    if (fifo) {
      for (int k = 0; k < 2; ++k) {
        Entry* entry = calloc(1, sizeof *entry);
        if (!entry) return 3;
        if (tail) tail->next = entry; else head = entry;
        tail = entry;
      }
      Entry* oldest = head;
      head = oldest->next;
      free(oldest);
    } else if (in_place) {
      char* grown = realloc(buffer, length + 64);
      if (!grown) return 3;
      memset(grown + length, 1, 64);
      buffer = grown;
      length += 64;
    } else if (doubling) {
      if (length + 64 > capacity) {
        capacity = capacity ? 2 * capacity : 256;
        char* grown = malloc(capacity);
        if (!grown) return 3;
        if (buffer) memcpy(grown, buffer, length);
        free(buffer);
        buffer = grown;
      }
      memset(buffer + length, 1, 64);
      length += 64;
    } else {
      char* grown = malloc(length + 64);
      if (!grown) return 3;
      if (buffer) memcpy(grown, buffer, length);
      memset(grown + length, 1, 64);
      free(buffer);
      buffer = grown;
      length += 64;
    }
    LEAKBOUND_STEP();
  }
  long entries = 0;
  for (Entry* e = head; e; e = e->next) ++entries;
  printf("known_limits %s: %d steps, %ld entries, a buffer of %zu bytes\n", mode, steps, entries,
         length);
  return 0;
}
