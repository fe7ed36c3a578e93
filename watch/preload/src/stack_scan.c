/* Callers past code in no module (a JIT's output), for the call sites the marker asks about.
 * backtrace() unwinds with the modules' unwind tables, so it stops at the first frame of
 * generated code that registered none: a site there had no caller, and its row no line of the
 * program's own. This finds the return address of the allocating call in the stack (the hooks
 * keep frame pointers, so walking their chain finds the slot that holds it exactly), then reads
 * the words above it, the generated code's frame and its caller's, for return addresses into a
 * module that follow a call instruction. A heuristic, as any stack scan: a stale return address
 * left in the generated frame's padding reads the same, so the frames it finds are sent marked
 * as found by a scan (docs/watch.md, "Call sites"). Only with a capture of an asked site's stack
 * (its callers, its samples), never on an allocation's common path;
 * every read goes through process_vm_readv, so a word that is not mapped is not read, never a
 * fault. x86-64 with glibc 2.35+ (_dl_find_object); elsewhere it finds nothing. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload_internal.h"

#if defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)

enum {
  kChainDepth = 16, /* the hook's frames between here and the allocating call */
  kScanWords = 64,  /* words read above that call's return address */
};

/* Copies [from, from + bytes) of this process's memory into `into`; what could be read. */
static size_t ReadOwn(uintptr_t from, void* into, size_t bytes) {
  struct iovec local = {into, bytes};
  struct iovec remote = {(void*)from, bytes};
  const long got = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1L, &remote, 1L, 0L);
  return got > 0 ? (size_t)got : 0;
}

static const struct link_map* ModuleOf(uintptr_t pc) {
  struct dl_find_object found;
  return _dl_find_object((void*)pc, &found) == 0 ? found.dlfo_link_map : NULL;
}

/* The length of a `call` (FF /2) whose ModRM byte is `modrm` and SIB byte `sib`: the opcode,
 * ModRM, an optional SIB and the displacement; 0 when the ModRM is not /2. */
static int IndirectCallLength(unsigned char modrm, unsigned char sib) {
  if ((modrm & 0x38) != 0x10) return 0;
  const int mod = modrm >> 6, rm = modrm & 7;
  if (mod == 3) return 2;
  const int has_sib = rm == 4;
  int length = 2 + has_sib;
  if (mod == 1) length += 1;
  if (mod == 2 || (mod == 0 && rm == 5) || (mod == 0 && has_sib && (sib & 7) == 5)) length += 4;
  return length;
}

/* Whether the bytes that end at pc are a call: E8 rel32, or FF /2 (through a register or
 * memory), with or without a REX prefix. */
static int FollowsCall(uintptr_t pc) {
  unsigned char b[8];
  if (pc < sizeof b || ReadOwn(pc - sizeof b, b, sizeof b) != sizeof b) return 0;
  if (b[3] == 0xE8) return 1;
  for (int length = 2; length <= 7; ++length) {
    const int at = (int)sizeof b - length;
    if (b[at] == 0xFF && IndirectCallLength(b[at + 1], at + 2 < 8 ? b[at + 2] : 0) == length) {
      return 1;
    }
  }
  return 0;
}

int LeakboundScanPast(uintptr_t pc, uintptr_t* out, int most) {
  /* The frame-pointer chain of the hook's frames (this library keeps frame pointers): the frame
   * whose return address is pc holds pc's slot. */
  uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
  uintptr_t slot = 0;
  for (int depth = 0; depth < kChainDepth && frame != 0 && slot == 0; ++depth) {
    uintptr_t link[2]; /* the saved frame pointer, the return address */
    if (ReadOwn(frame, link, sizeof link) != sizeof link) break;
    if (link[1] == pc) slot = frame + sizeof(uintptr_t);
    if (link[0] <= frame) break; /* the chain goes up the stack, or it is not a chain */
    frame = link[0];
  }
  if (slot == 0) return 0;
  uintptr_t words[kScanWords];
  const size_t n = ReadOwn(slot + sizeof(uintptr_t), words, sizeof words) / sizeof *words;
  const struct link_map* own = ModuleOf((uintptr_t)&LeakboundScanPast);
  int found = 0;
  for (size_t i = 0; i < n && found < most; ++i) {
    const struct link_map* module = ModuleOf(words[i]);
    if (module != NULL && module != own && FollowsCall(words[i])) out[found++] = words[i];
  }
  return found;
}

int LeakboundInNoModule(uintptr_t pc) { return ModuleOf(pc) == NULL; }

#else

int LeakboundScanPast(uintptr_t pc, uintptr_t* out, int most) {
  (void)pc;
  (void)out;
  (void)most;
  return 0;
}

int LeakboundInNoModule(uintptr_t pc) {
  (void)pc;
  return 0;
}

#endif
