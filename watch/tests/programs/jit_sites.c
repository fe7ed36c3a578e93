/* Allocations made from code in no module (a JIT's output: an anonymous executable mapping), at
 * two call sites: `leak` keeps a 32-byte block from the first and a 48-byte one from the second
 * each step (`clean` frees both). The two sites must stay two rows of the report's Growing table,
 * at 32 and 48 B/step (they used to share the name "?" and be summed into one row of 80).
 * `many`: more call sites than the preload's site table holds (65,535): each step allocates 64
 * bytes at 70,000 stubs of generated code and frees them, and keeps 40 bytes a step at one line
 * of main, claimed after the table is full (`many-clean`: the same, freeing those 40 bytes the
 * next step). x86-64 only: exits 77 elsewhere.
 * Usage: watch_jit_sites leak|clean|many|many-clean STEPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "leakbound/watch/step.h"

typedef void* (*Allocate)(size_t);

/* fn(size) { return malloc(size); }: sub rsp,8; mov rax,malloc; call rax; add rsp,8; ret */
static void Emit(unsigned char* at, void* (*target)(size_t)) {
  static const unsigned char head[] = {0x48, 0x83, 0xEC, 0x08, 0x48, 0xB8};
  static const unsigned char tail[] = {0xFF, 0xD0, 0x48, 0x83, 0xC4, 0x08, 0xC3};
  const uint64_t address = (uint64_t)(uintptr_t)target;
  memcpy(at, head, sizeof head);
  memcpy(at + sizeof head, &address, sizeof address);
  memcpy(at + sizeof head + sizeof address, tail, sizeof tail);
}

enum { kStubs = 70000, kStubBytes = 32 };

#if defined(__x86_64__)
static int Many(unsigned char* code, int steps, int leak) {
  static void* held[kStubs];
  void** kept = calloc((size_t)steps, sizeof *kept);
  if (kept == NULL) return 3;
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < kStubs; ++i) {
      held[i] = ((Allocate)(uintptr_t)(code + (size_t)i * kStubBytes))(64);
    }
    for (int i = 0; i < kStubs; ++i) free(held[i]);
    kept[step] = malloc(40); /* the leak: 40 B a step */
    if (!leak && step > 0) free(kept[step - 1]);
    leakbound_watch_step();
  }
  return kept[0] == (void*)1 ? 4 : 0;
}
#endif

int main(int argc, char** argv) {
  const int many = argc == 3 && strcmp(argv[1], "many") == 0;
  const int many_clean = argc == 3 && strcmp(argv[1], "many-clean") == 0;
  if (argc != 3 || (strcmp(argv[1], "leak") != 0 && strcmp(argv[1], "clean") != 0 && !many &&
                    !many_clean)) {
    fprintf(stderr, "usage: %s leak|clean|many|many-clean STEPS\n", argv[0]);
    return 2;
  }
#if defined(__x86_64__)
  const int leak = strcmp(argv[1], "leak") == 0;
  const int steps = atoi(argv[2]);
  if (steps <= 0 || steps > 1000000) return 2;
  unsigned char* code = mmap(NULL, kStubs * kStubBytes, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 3;
  for (int i = 0; i < kStubs; ++i) Emit(code + (size_t)i * kStubBytes, malloc);
  if (mprotect(code, kStubs * kStubBytes, PROT_READ | PROT_EXEC) != 0) {
    perror("watch_jit_sites: mprotect");
    return 77; /* a system that forbids executable mappings */
  }
  if (many || many_clean) return Many(code, steps, many);
  const Allocate kept = (Allocate)(uintptr_t)code;
  const Allocate other = (Allocate)(uintptr_t)(code + kStubBytes);
  void** all = calloc(2 * (size_t)steps, sizeof *all);
  for (int step = 0; step < steps; ++step) {
    void* first = kept(32);
    void* second = other(48);
    if (leak) {
      all[2 * step] = first;
      all[2 * step + 1] = second;
    } else {
      free(first);
      free(second);
    }
    leakbound_watch_step();
  }
  return all[0] == (void*)1 ? 4 : 0;
#else
  fprintf(stderr, "watch_jit_sites: x86-64 only\n");
  return 77;
#endif
}
