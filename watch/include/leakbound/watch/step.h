/* Step markers for a program watched by `leakbound watch` (docs/watch.md). Header-only: the
 * marker is resolved at run time with dlsym(RTLD_DEFAULT, "leakbound_step"), so a program that
 * includes this runs unchanged (the call does nothing) when leakbound's preload is not loaded.
 * Link with -ldl on glibc < 2.34. Call LEAKBOUND_STEP() (or leakbound_watch_step()) once at the
 * end of every step: the sample taken there is the state after that step. */
#ifndef LEAKBOUND_WATCH_STEP_H_
#define LEAKBOUND_WATCH_STEP_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*leakbound_step_fn)(void);

/* The preload's marker, or NULL without leakbound (looked up once; thread-safe: a racing
 * lookup writes the same value). */
static inline leakbound_step_fn leakbound_watch_step_function(void) {
  static leakbound_step_fn resolved;
  static int looked_up;
  if (!__atomic_load_n(&looked_up, __ATOMIC_ACQUIRE)) {
    void* symbol = dlsym(RTLD_DEFAULT, "leakbound_step");
    leakbound_step_fn fn;
    __builtin_memcpy(&fn, &symbol, sizeof fn);
    __atomic_store_n(&resolved, fn, __ATOMIC_RELAXED);
    __atomic_store_n(&looked_up, 1, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(&resolved, __ATOMIC_RELAXED);
}

/* Marks the end of one step; a no-op without leakbound. */
static inline void leakbound_watch_step(void) {
  leakbound_step_fn fn = leakbound_watch_step_function();
  if (fn) fn();
}

#define LEAKBOUND_STEP() leakbound_watch_step()

#ifdef __cplusplus
}
#endif

#endif /* LEAKBOUND_WATCH_STEP_H_ */
