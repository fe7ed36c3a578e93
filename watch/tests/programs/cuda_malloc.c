/* A real CUDA program (linked against cudart) for `leakbound watch`:
 * `cuda_malloc STEPS`. Each step cudaMallocs 1 MiB, frees it and marks a step.
 * Without a driver every CUDA call fails (error 35); the program says so once
 * and keeps stepping on the host, so watch still judges the host side and
 * reports why the device side is unavailable. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "leakbound/watch/step.h"

int main(int argc, char **argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  int reported = 0;
  for (int step = 0; step < steps; ++step) {
    void *device = NULL;
    const cudaError_t error = cudaMalloc(&device, 1 << 20);
    if (error == cudaSuccess) {
      cudaFree(device);
    } else if (!reported) {
      fprintf(stderr,
              "cuda_malloc: cudaMalloc failed: %s (%d); stepping on the host "
              "only\n",
              cudaGetErrorString(error), (int)error);
      reported = 1;
    }
    void *host = malloc(256);
    free(host);
    leakbound_watch_step();
  }
  return 0;
}
