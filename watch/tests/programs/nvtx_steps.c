/* A C program marked only by NVTX ranges, for `leakbound watch --step-range
 * train_step`: `nvtx_steps MODE STEPS`. Each step is a range "train_step"
 * (push/pop, or start/end with MODE
 * *-startend) holding a nested range "forward" that is not a step. Modes: leak
 * (24 bytes kept per step), clean (random sizes, all freed), and the -startend
 * twins. It never calls leakbound: without an NVTX tool every range call is a
 * no-op. */
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void Work(unsigned *seed) {
  void *blocks[16];
  for (int i = 0; i < 16; ++i) {
    blocks[i] = malloc(1 + (size_t)(rand_r(seed) % 4096));
    memset(blocks[i], i, 1);
  }
  for (int i = 0; i < 16; ++i) free(blocks[i]);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: nvtx_steps leak|clean|leak-startend|clean-startend STEPS\n");
    return 2;
  }
  const int leak = strncmp(argv[1], "leak", 4) == 0;
  const int start_end = strstr(argv[1], "startend") != NULL;
  const int steps = atoi(argv[2]);
  unsigned seed = 11;
  void **kept = calloc((size_t)steps + 1, sizeof(void *));
  for (int step = 0; step < steps; ++step) {
    nvtxRangeId_t id = 0;
    if (start_end) {
      id = nvtxRangeStartA("train_step");
    } else {
      nvtxRangePushA("train_step");
    }
    nvtxRangePushA("forward");
    Work(&seed);
    nvtxRangePop();
    if (leak) kept[step] = malloc(24);
    nvtxMarkA("not a step");
    if (start_end) {
      nvtxRangeEnd(id);
    } else {
      nvtxRangePop();
    }
  }
  printf("%d steps\n", steps);
  return 0;
}
