/* `census_family CLASS SEED STEPS`: one seeded program of the census property suite
 * (census_family.h) run for STEPS steps, each ended by leakbound_watch_step(). `census_family
 * --list` prints the classes with "bounded" or "leak". Exit 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "census_family.h"
#include "leakbound/watch/step.h"

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (const char *const *name = census_family_classes(); *name; ++name) {
      printf("%s %s\n", *name, census_family_leaks(*name) ? "leak" : "bounded");
    }
    return 0;
  }
  if (argc != 4) {
    fprintf(stderr, "usage: census_family CLASS SEED STEPS  (census_family --list for classes)\n");
    return 2;
  }
  char *end = NULL;
  const unsigned long long seed = strtoull(argv[2], &end, 10);
  if (!end || *end) {
    fprintf(stderr, "census_family: SEED must be a number, got '%s'\n", argv[2]);
    return 2;
  }
  const long steps = strtol(argv[3], &end, 10);
  if (!end || *end || steps < 1 || steps > 10000000) {
    fprintf(stderr, "census_family: STEPS must be in [1, 10000000], got '%s'\n", argv[3]);
    return 2;
  }
  census_family *f = census_family_make(argv[1], seed, (int)steps);
  if (!f) {
    fprintf(stderr, "census_family: unknown class '%s' (census_family --list)\n", argv[1]);
    return 2;
  }
  for (int step = 0; step < (int)steps; ++step) {
    census_family_step(f, step);
    leakbound_watch_step();
  }
  census_family_free(f);
  return 0;
}
