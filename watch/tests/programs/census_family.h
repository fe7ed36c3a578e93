/* Seeded families of programs for the census property suite (docs/verdicts.md, "Measured"):
 * each class is a kind of memory behaviour, bounded or leaking, and each seed draws its
 * parameters (sizes, periods, rates). The same code runs under `leakbound watch` (the
 * census_family program) and inside the Runner (harness/tests/census_property_test.cc), so both
 * recorders are measured on the same programs. Plain C, malloc/free only. */
#ifndef LEAKBOUND_WATCH_TESTS_CENSUS_FAMILY_H_
#define LEAKBOUND_WATCH_TESTS_CENSUS_FAMILY_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct census_family census_family;

/* The classes, by name: bounded ones first ("clean"), then the leaks. */
const char *const *census_family_classes(void); /* NULL-terminated */
/* 1 when the class plants a leak, 0 when it is bounded, -1 for an unknown name. */
int census_family_leaks(const char *name);

/* A program of class `name` for a run of `steps` steps, its parameters drawn from `seed`.
 * NULL for an unknown class (or no memory). */
census_family *census_family_make(const char *name, uint64_t seed, int steps);
/* The power-curve program: a leak of `rate` bytes a step (below 1: one byte every 1/rate steps)
 * under a working set of one buffer of random size up to `noise_kib` KiB held across each step
 * (0: none). */
census_family *census_family_make_power(uint64_t seed, int steps, double rate, int noise_kib);
/* One step (step = 0, 1, ..., steps - 1). */
void census_family_step(census_family *f, int step);
/* What the seed drew, for a report line ("rate 24 B/step, working set up to 100 KiB"). */
const char *census_family_describe(const census_family *f);
/* Frees everything the program holds, leaks included, and the program. */
void census_family_free(census_family *f);

#ifdef __cplusplus
}
#endif

#endif /* LEAKBOUND_WATCH_TESTS_CENSUS_FAMILY_H_ */
