/* A fake CUDA program for testing `leakbound watch`'s CUDA injection without a
 * GPU: `fake_cuda MODE STEPS`. It does what the CUDA driver does at
 * initialisation (loads CUDA_INJECTION64_PATH and calls InitializeInjection),
 * then "allocates device memory" through the stub libcupti's controls
 * (LEAKBOUND_CUPTI_LIBRARY), which the observer receives as CUPTI activity
 * records. Modes: flat (1 MiB allocated and freed per step, one 4 MiB workspace
 * kept), leak (+4 KiB cudaMalloc per step, never freed), pool (a
 * cudaMallocAsync freed each step while the pool's reserve grows by 64 KiB),
 * twice (flat, with InitializeInjection called again and from a second copy of
 * the library in FAKE_CUDA_SECOND_COPY). Host memory stays flat. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leakbound/watch/step.h"

typedef void (*Alloc)(uint64_t, uint64_t);
typedef void (*AsyncAlloc)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);
typedef void (*PoolCreated)(uint64_t, uint64_t);

static void *Symbol(void *library, const char *name) {
  void *symbol = dlsym(library, name);
  if (symbol == NULL) {
    fprintf(stderr, "fake_cuda: %s: %s\n", name, dlerror());
    exit(3);
  }
  return symbol;
}

/* The driver's side of CUDA_INJECTION64_PATH. */
static void Inject(const char *path) {
  if (path == NULL || *path == '\0') return;
  void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "fake_cuda: cannot load %s: %s\n", path, dlerror());
    exit(3);
  }
  int (*initialize)(void);
  void *symbol = Symbol(library, "InitializeInjection");
  memcpy(&initialize, &symbol, sizeof symbol);
  if (initialize() != 1) fprintf(stderr, "fake_cuda: InitializeInjection returned 0\n");
}

static void HostWork(unsigned *seed) {
  void *blocks[8];
  for (int i = 0; i < 8; ++i) blocks[i] = malloc(1 + (size_t)(rand_r(seed) % 2048));
  for (int i = 0; i < 8; ++i) free(blocks[i]);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fake_cuda flat|leak|pool|twice STEPS\n");
    return 2;
  }
  const char *mode = argv[1];
  const int steps = atoi(argv[2]);
  Inject(getenv("CUDA_INJECTION64_PATH"));
  if (strcmp(mode, "twice") == 0) {
    Inject(getenv("CUDA_INJECTION64_PATH"));
    Inject(getenv("FAKE_CUDA_SECOND_COPY"));
  }
  const char *stub_path = getenv("LEAKBOUND_CUPTI_LIBRARY");
  void *stub = stub_path ? dlopen(stub_path, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (stub == NULL) {
    fprintf(stderr, "fake_cuda: set LEAKBOUND_CUPTI_LIBRARY to the stub libcupti\n");
    return 3;
  }
  Alloc device_malloc = (Alloc)Symbol(stub, "stub_cupti_malloc");
  Alloc device_free = (Alloc)Symbol(stub, "stub_cupti_free");
  AsyncAlloc malloc_async = (AsyncAlloc)Symbol(stub, "stub_cupti_malloc_async");
  AsyncAlloc free_async = (AsyncAlloc)Symbol(stub, "stub_cupti_free_async");
  PoolCreated pool_created = (PoolCreated)Symbol(stub, "stub_cupti_pool_created");

  const uint64_t kMiB = 1u << 20, pool = 0x7f0000000000ull;
  device_malloc(0x10000000ull, 4 * kMiB); /* a workspace, kept for the whole run */
  pool_created(pool, 2 * kMiB);
  unsigned seed = 5;
  for (int step = 0; step < steps; ++step) {
    HostWork(&seed);
    if (strcmp(mode, "leak") == 0) {
      device_malloc(0x20000000ull + (uint64_t)step * 0x10000, 4096);
    } else if (strcmp(mode, "pool") == 0) {
      const uint64_t reserve = 2 * kMiB + (uint64_t)(step + 1) * 65536;
      malloc_async(0x30000000ull, kMiB, pool, reserve, kMiB);
      free_async(0x30000000ull, kMiB, pool, reserve, 0);
    } else {
      device_malloc(0x40000000ull, kMiB);
      device_free(0x40000000ull, kMiB);
    }
    leakbound_watch_step();
  }
  printf("%d steps\n", steps);
  return 0;
}
