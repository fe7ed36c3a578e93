/* The callers and samples of the call sites the marker asks about (sites.c asks: a site whose
 * survivors grew at LEAKBOUND_WATCH_FRAMES_AFTER markers). The next allocation there takes the
 * site's callers (backtrace, for such sites only: not for the thousands of sites a program's
 * start-up claims); that one and the next LEAKBOUND_WATCH_SAMPLES - 1 allocations there are kept
 * as samples, each with the stack it came from (a backtrace each) and the Python line running at
 * the time (leakbound_python_where). A free of a sampled
 * block marks it dead, so the marker can say which stack and which line the samples that
 * survive came from: the caller whose blocks stay, not the one that happened to allocate
 * first. */
#include <execinfo.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sites_internal.h"

LB_HIDDEN SiteSamples* _Atomic g_sample_chunks[kSampleChunks];
LB_HIDDEN uint32_t g_samples_used;

uint32_t LeakboundSamplesTake(void) {
  if (g_samples_used == kSampledSites) return 0;
  const uint32_t chunk = g_samples_used / kSamplesPerChunk;
  if (atomic_load_explicit(&g_sample_chunks[chunk], memory_order_relaxed) == NULL) {
    /* A raw syscall: no interposed mmap books it. Zero pages, as the static pool was. */
    const long mapped = syscall(SYS_mmap, NULL, sizeof(SiteSamples) * kSamplesPerChunk,
                                PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == -1) return 0; /* address space is short: this site keeps its name */
    atomic_store_explicit(&g_sample_chunks[chunk], (SiteSamples*)mapped, memory_order_relaxed);
  }
  return ++g_samples_used;
}

static __thread int t_unwinding; /* backtrace may allocate: no capture inside a capture */
static _Atomic int g_unwinder_ready; /* sites claimed before the warm-up keep no callers */
/* Python attribution (leakbound_python_*): the line the thread's Python code runs, set by the
 * leakbound module's tracer while the marker wants samples. */
static __thread const char* t_python_where;
static _Atomic int g_python_tracer;   /* the module will trace: samples wait for its tracing */
static _Atomic int g_python_tracing;  /* its tracer runs: samples carry the line */

void LeakboundSitesWarmUp(void) {
  void* frames[2];
  t_unwinding = 1;
  backtrace(frames, 2);
  t_unwinding = 0;
  atomic_store(&g_unwinder_ready, 1);
}

/* The callers of the allocation call at pc: what backtrace finds past the frame that returns to
 * pc (the hook's own frames come before it); with_pc: pc itself first (the overflow site, whose
 * own name says nothing of where it allocates). */
static void Capture(SiteStack* s, uintptr_t pc, int with_pc) {
  t_unwinding = 1;
  void* frames[LEAKBOUND_WATCH_FRAMES + 8];
  const int n = backtrace(frames, (int)(sizeof frames / sizeof frames[0]));
  t_unwinding = 0;
  int at = 0;
  while (at < n && (uintptr_t)frames[at] != pc) ++at;
  int kept = 0;
  if (with_pc) s->frames[kept++] = pc;
  for (int i = at + 1; i < n && kept < LEAKBOUND_WATCH_FRAMES; ++i) {
    s->frames[kept++] = (uintptr_t)frames[i];
  }
  s->scanned_from = kept;
  /* The unwinder stopped at pc, in code of no module: its callers from the stack. */
  if (at + 1 == n && LeakboundInNoModule(pc)) {
    kept += LeakboundScanPast(pc, s->frames + kept, kScannedFrames);
  }
  s->count = at < n ? kept : with_pc;
}

/* Writes sample `at`: the thread's Python line, the stack (a copy of `taken`, else captured for
 * pc), then the block that publishes them. Its version is odd meanwhile, for a sample written
 * again while the marker may read it (CopySample); the writer takes the sample by moving its
 * version from even to odd, so that two threads never write one sample at once (a refill of a
 * sample whose first writer, past its claim, has not published it yet): the one that finds it
 * taken writes nothing. */
static void WriteSample(SiteSamples* cold, int at, void* block, const SiteStack* taken,
                        uintptr_t pc, int with_pc) {
  _Atomic uint32_t* version = &cold->sample_version[at];
  uint32_t v = atomic_load_explicit(version, memory_order_relaxed);
  if ((v & 1) != 0 || !atomic_compare_exchange_strong_explicit(version, &v, v + 1,
                                                               memory_order_relaxed,
                                                               memory_order_relaxed)) {
    return;
  }
  atomic_thread_fence(memory_order_release);
  cold->sample_where[at] = t_python_where;
  if (taken != NULL) {
    cold->sample_stack[at] = *taken;
  } else {
    Capture(&cold->sample_stack[at], pc, with_pc);
  }
  atomic_store_explicit(version, v + 2, memory_order_release);
  atomic_store_explicit(&cold->sample_block[at], block, memory_order_release);
}

/* The overflow site's reservoir: the block takes the first sample never taken, else one whose
 * block was freed; one thread at a time (another skips this block). The marker may read a sample
 * while it is being taken again (its block was freed meanwhile): its stack can then be the new
 * one's, an attribution that may be off by one sample, never a fault. */
static atomic_flag g_refilling = ATOMIC_FLAG_INIT;
static void RefillSample(SiteSamples* cold, uintptr_t pc, void* block) {
  if (atomic_flag_test_and_set_explicit(&g_refilling, memory_order_acquire)) return;
  const int claimed = atomic_load_explicit(&cold->samples_claimed, memory_order_relaxed);
  int at = claimed < LEAKBOUND_WATCH_SAMPLES ? claimed : -1;
  for (int i = 0; at < 0 && i < LEAKBOUND_WATCH_SAMPLES; ++i) {
    if (atomic_load_explicit(&cold->sample_block[i], memory_order_relaxed) == NULL) at = i;
  }
  if (at >= 0) {
    WriteSample(cold, at, block, NULL, pc, 1);
    if (at == claimed) atomic_store_explicit(&cold->samples_claimed, claimed + 1, memory_order_relaxed);
  }
  atomic_flag_clear_explicit(&g_refilling, memory_order_release);
}

/* With the module's tracer present, a sample needs this thread's line: none while it is not
 * tracing, none from a thread it does not trace (only the main thread's line is known). */
static inline int NoLineYet(void) {
  return atomic_load_explicit(&g_python_tracer, memory_order_relaxed) &&
         (!atomic_load_explicit(&g_python_tracing, memory_order_relaxed) || t_python_where == NULL);
}

/* A draw of the thread's own (xorshift64*): the refills' reservoir. */
static __thread uint64_t t_draw;
static uint64_t Draw(void) {
  uint64_t x = t_draw ? t_draw : ((uint64_t)(uintptr_t)&t_draw | 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  t_draw = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* A thread's count of its allocations in a site's refill round: kRefillCounts sites at once,
 * found by search (a site takes the entry used longest ago), so that sites armed together do not
 * reset each other's counts (a count of 1 at every allocation: a capture each). */
enum { kRefillCounts = 16 };
typedef struct RefillCount {
  uint32_t site; /* slot + 1 */
  uint32_t round;
  uint32_t seen;
} RefillCount;
static __thread RefillCount t_refill[kRefillCounts];
static __thread uint32_t t_refill_next;

/* A round in which one thread made this many allocations at the site is over for it (the site
 * goes back to kSampled): a site that stopped changing is not visited, so no read would end it,
 * and its allocations would take this path to the end of the run. The next visit arms it again. */
enum { kRefillMost = 4096 };

/* kRefill: this block is the n-th of the thread's in the refill's round; it takes sample
 * refill_slot with probability 1/n (a reservoir of one), while no other thread writes a sample
 * again (another candidate is skipped). With the module's tracer present, only blocks with a
 * line are drawn (the marker arms refills there only while the tracer runs). */
static void RefillDead(Site* s, size_t slot, SiteSamples* cold, uintptr_t pc, void* block) {
  atomic_thread_fence(memory_order_acquire); /* the fields the marker set before kRefill */
  const uint32_t round = atomic_load_explicit(&cold->refill_round, memory_order_relaxed);
  RefillCount* count = NULL;
  for (int i = 0; i < kRefillCounts && count == NULL; ++i) {
    if (t_refill[i].site == slot + 1) count = &t_refill[i];
  }
  if (count == NULL) {
    count = &t_refill[t_refill_next++ % kRefillCounts];
    count->site = (uint32_t)slot + 1;
    count->round = round + 1; /* reset below */
  }
  if (count->round != round) {
    count->round = round;
    count->seen = 0;
  }
  const uint32_t n = ++count->seen;
  if (n > kRefillMost) {
    int armed = kRefill;
    atomic_compare_exchange_strong(&s->frames_state, &armed, kSampled);
    return;
  }
  if (NoLineYet()) return;
  if (n > 1 && Draw() % n != 0) return;
  if (atomic_flag_test_and_set_explicit(&g_refilling, memory_order_acquire)) return;
  const int at = atomic_load_explicit(&cold->refill_slot, memory_order_relaxed);
  if (at >= 0 && at < LEAKBOUND_WATCH_SAMPLES) WriteSample(cold, at, block, NULL, pc, 0);
  atomic_flag_clear_explicit(&g_refilling, memory_order_release);
}

/* Take the callers if no other thread is taking them, then keep the block as a sample while
 * there is room. With a Python tracer present, nothing is taken until it traces (the line would
 * be missing). */
void LeakboundSampleSlow(size_t slot, uintptr_t pc, void* block, int state) {
  Site* s = &g_sites[slot];
  SiteSamples* cold = SamplesOf(slot);
  if (t_unwinding || cold == NULL) return;
  if (state == kRefill) {
    RefillDead(s, slot, cold, pc, block);
    return;
  }
  int took_callers = 0;
  if (state == kFramesWanted) {
    int wanted = kFramesWanted;
    if (!atomic_load_explicit(&g_unwinder_ready, memory_order_relaxed) ||
        !atomic_compare_exchange_strong(&s->frames_state, &wanted, kFramesTaking)) {
      return;
    }
    Capture(&cold->callers, pc, slot == kOverflowSite - 1);
    took_callers = 1;
    atomic_store_explicit(&s->frames_state, kSampling, memory_order_release);
  }
  if (NoLineYet()) return; /* with the module's tracer present, only blocks with a line */
  if (slot == kOverflowSite - 1) {
    RefillSample(cold, pc, block);
    return;
  }
  const int at = atomic_fetch_add_explicit(&cold->samples_claimed, 1, memory_order_relaxed);
  if (at >= LEAKBOUND_WATCH_SAMPLES) return;
  WriteSample(cold, at, block, took_callers ? &cold->callers : NULL, pc, 0);
  if (at == LEAKBOUND_WATCH_SAMPLES - 1) {
    atomic_store_explicit(&s->frames_state, kSampled, memory_order_release);
  }
}

void LeakboundSampleFreed(size_t slot, void* block) {
  SiteSamples* cold = SamplesOf(slot);
  if (cold == NULL) return;
  for (int i = 0; i < LEAKBOUND_WATCH_SAMPLES; ++i) {
    void* expected = block;
    if (atomic_load_explicit(&cold->sample_block[i], memory_order_relaxed) == block &&
        atomic_compare_exchange_strong(&cold->sample_block[i], &expected, NULL)) {
      return;
    }
  }
}

static void CopyStack(const SiteStack* from, uintptr_t* out, int most, int* count,
                      int* scanned_from) {
  int n = from->count < most ? from->count : most;
  if (n < 0) n = 0;
  memcpy(out, from->frames, (size_t)n * sizeof *out);
  *count = n;
  *scanned_from = from->scanned_from;
}

int LeakboundSiteFrames(uint32_t site, uintptr_t* out, int most, int* scanned_from) {
  if (site == 0 || site > kSiteSlots) return 0;
  if (atomic_load_explicit(&g_sites[site - 1].frames_state, memory_order_acquire) < kSampling) {
    return 0;
  }
  const SiteSamples* s = SamplesOf(site - 1);
  if (s == NULL) return 0;
  int n = 0;
  CopyStack(&s->callers, out, most, &n, scanned_from);
  return n;
}

static int SameStack(const SiteStack* a, const SiteStack* b) {
  return a->count == b->count && a->scanned_from == b->scanned_from &&
         memcmp(a->frames, b->frames, (size_t)a->count * sizeof a->frames[0]) == 0;
}

/* A live sample's line and stack, copied: 1 when its block was live and the copy is whole (the
 * reservoir did not write the sample again meanwhile). */
static int CopySample(const SiteSamples* samples, int i, const char** where, SiteStack* stack) {
  const uint32_t before = atomic_load_explicit(&samples->sample_version[i], memory_order_acquire);
  /* The block first (acquire): a sample's line and stack were written before its block. */
  if ((before & 1) != 0 ||
      atomic_load_explicit(&samples->sample_block[i], memory_order_acquire) == NULL) {
    return 0;
  }
  *where = samples->sample_where[i];
  *stack = samples->sample_stack[i];
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&samples->sample_version[i], memory_order_relaxed) == before;
}

static uint64_t StackHash(const SiteStack* stack) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)stack->count ^ ((uint64_t)stack->scanned_from << 8);
  for (int i = 0; i < stack->count && i < LEAKBOUND_WATCH_FRAMES; ++i) {
    h = (h ^ stack->frames[i]) * 0x100000001B3ull;
  }
  return h;
}

/* The last read at this many visits (markers at which the site's books changed). */
enum { kLastRead = 4096 };

int LeakboundSiteSamplesDue(uint32_t site, int64_t bytes, LeakboundSiteSamplesRead* out) {
  if (site == 0 || site > kSiteSlots) return 0;
  SiteCold* s = &g_cold[site - 1];
  const int state = atomic_load_explicit(&g_sites[site - 1].frames_state, memory_order_acquire);
  /* Not before the callers were sent (a forked child samples anew before its sites grew again):
   * what the watcher names the row by starts as those callers. */
  if (state < kSampling || state == kRead || !s->frames_sent) return 0;
  SiteSamples* samples = SamplesOf(site - 1);
  if (samples == NULL) return 0;
  /* Samples are first read once their blocks had a step to die in: two visits after the last one
   * was kept, or LEAKBOUND_WATCH_SAMPLE_VISITS visits after the callers (a site that allocates
   * rarely, and the overflow site, whose reservoir is never full for good); then at twice the
   * visits of the read before, up to kLastRead. */
  ++s->visits_sampling;
  const int sampled = state == kSampled || state == kRefill;
  if (sampled && s->visits_full < UINT8_MAX) ++s->visits_full;
  /* A dead sample is taken again by an allocation drawn from those until the next visit
   * (kRefill); with none dead, no draw. */
  if (sampled && site != kOverflowSite) {
    /* With the module's tracer present, only while it runs (a refill without a line would draw
     * nothing and keep the site's allocations on the slow path). A sample being written (odd
     * version) is not dead. */
    const int can_draw = !atomic_load_explicit(&g_python_tracer, memory_order_relaxed) ||
                         atomic_load_explicit(&g_python_tracing, memory_order_relaxed);
    int dead = -1;
    for (int i = 0; can_draw && i < LEAKBOUND_WATCH_SAMPLES && dead < 0; ++i) {
      if (atomic_load_explicit(&samples->sample_block[i], memory_order_relaxed) == NULL &&
          (atomic_load_explicit(&samples->sample_version[i], memory_order_relaxed) & 1) == 0) {
        dead = i;
      }
    }
    if (dead >= 0) {
      atomic_store_explicit(&samples->refill_slot, dead, memory_order_relaxed);
      atomic_fetch_add_explicit(&samples->refill_round, 1, memory_order_relaxed);
    }
    int seen = state;
    atomic_compare_exchange_strong_explicit(&g_sites[site - 1].frames_state, &seen,
                                            dead >= 0 ? kRefill : kSampled, memory_order_release,
                                            memory_order_relaxed);
  }
  const int64_t bytes_before = samples->read_bytes;
  if (samples->next_read == 0) {
    if (s->visits_full < 2 && s->visits_sampling < LEAKBOUND_WATCH_SAMPLE_VISITS) {
      samples->read_bytes = bytes;
      return 0;
    }
    samples->next_read = s->visits_sampling;
    samples->sent_stack = StackHash(&samples->callers);
  }
  if (s->visits_sampling != samples->next_read || samples->next_read > kLastRead) return 0;
  samples->next_read *= 2;
  samples->read_bytes = bytes;
  int claimed = atomic_load_explicit(&samples->samples_claimed, memory_order_relaxed);
  if (claimed > LEAKBOUND_WATCH_SAMPLES) claimed = LEAKBOUND_WATCH_SAMPLES;
  memset(out, 0, sizeof *out);
  out->taken = claimed;
  /* The live samples, copied first: the rest reads the copies. */
  const char* where[LEAKBOUND_WATCH_SAMPLES];
  SiteStack stack[LEAKBOUND_WATCH_SAMPLES];
  int live = 0;
  for (int i = 0; i < claimed; ++i) live += CopySample(samples, i, &where[live], &stack[live]);
  out->live = live;
  int sent_live = 0, best = -1, best_live = 0;
  const char* best_where = NULL;
  int where_live = 0;
  for (int i = 0; i < live; ++i) {
    sent_live += StackHash(&stack[i]) == samples->sent_stack;
    int here = 0, stack_here = 0;
    for (int j = 0; j < live; ++j) {
      here += where[i] != NULL && where[j] == where[i];
      stack_here += SameStack(&stack[j], &stack[i]);
    }
    if (here > where_live) {
      where_live = here;
      best_where = where[i];
    }
    if (stack_here > best_live) {
      best_live = stack_here;
      best = i;
    }
  }
  /* The stack most live samples came from names the row: sent when more of them came from it
   * than from the one the watcher has (a tie keeps that one). */
  if (best >= 0 && best_live > sent_live && stack[best].count > 0) {
    CopyStack(&stack[best], out->frames, LEAKBOUND_WATCH_FRAMES, &out->frame_count,
              &out->scanned_from);
    out->stack_live = best_live;
    out->restacked = 1;
    samples->sent_stack = StackHash(&stack[best]);
  }
  /* The line most live samples came from, when it or its counts moved. */
  if (best_where != NULL && (best_where != samples->sent_where ||
                             where_live != samples->sent_live_here || live != samples->sent_live)) {
    out->where = best_where;
    out->live_here = where_live;
    samples->sent_where = best_where;
    samples->sent_live_here = where_live;
    samples->sent_live = live;
  }
  /* Nothing more to learn once the last read is done, or at a read that finds no sample live
   * while the site's live bytes did not rise since the read before (a clean site: a busy one kept
   * taking the slow path to the end of the run when its refills went on regardless, the 4-thread
   * loop under --interval 3.9x instead of 2.3x). A site that still grows goes on: its first 16
   * may all have come from callers that free at once, in steps the leaking caller skipped. Its
   * frees stop looking for samples (and its allocations for refills); the report keeps what was
   * sent last. */
  if (samples->next_read > kLastRead ||
      (live == 0 && bytes <= bytes_before && site != kOverflowSite)) {
    atomic_store_explicit(&g_sites[site - 1].frames_state, kRead, memory_order_release);
  }
  return out->where != NULL || out->restacked;
}

void LeakboundSamplesForget(size_t i, int forked_child) {
  /* A forked child samples anew: the parent's samples are its blocks and its lines. Callers
   * already taken stay (the same code); a capture another thread was in is lost with it. */
  const int state = atomic_load_explicit(&g_sites[i].frames_state, memory_order_relaxed);
  SiteSamples* samples = SamplesOf(i);
  if (state != kFramesNone && samples != NULL) {
    atomic_store_explicit(&samples->samples_claimed, 0, memory_order_relaxed);
    samples->next_read = 0;
    samples->read_bytes = 0;
    atomic_fetch_add_explicit(&samples->refill_round, 1, memory_order_relaxed);
    samples->sent_where = NULL;
    samples->sent_live_here = samples->sent_live = 0;
    samples->sent_stack = 0;
    for (int k = 0; k < LEAKBOUND_WATCH_SAMPLES; ++k) {
      atomic_store_explicit(&samples->sample_block[k], NULL, memory_order_relaxed);
      samples->sample_where[k] = NULL;
      /* A parent thread inside WriteSample at the fork left the version odd in the child, which
       * does not have that thread: the sample would never be written or read again. */
      const uint32_t v = atomic_load_explicit(&samples->sample_version[k], memory_order_relaxed);
      if (forked_child && (v & 1) != 0) {
        atomic_store_explicit(&samples->sample_version[k], v + 1, memory_order_relaxed);
      }
    }
    atomic_store_explicit(&g_sites[i].frames_state,
                          state == kFramesTaking ? kFramesNone
                          : state >= kSampling   ? kSampling
                                                 : state,
                          memory_order_relaxed);
  }
}

void LeakboundSamplesForgetAll(int forked_child) {
  /* The child's module (the same interpreter: a tracer is still present) drops a tracer it
   * inherited from a traced step and traces again from its own steps (watch/python/leakbound). */
  atomic_store(&g_python_tracing, 0);
  t_python_where = NULL;
  /* A parent thread inside RefillSample at the fork left the flag set in the child, which does
   * not have that thread: the reservoir would never sample again. */
  if (forked_child) atomic_flag_clear(&g_refilling);
}

/* The leakbound module's side (watch/python/leakbound): it says whether its tracer runs (1),
 * will run when sites wait (0: samples wait for it) or never again (-1: samples are taken
 * without a line), asks how many sites wait for samples (the count at the last marker), and
 * sets the thread's line ("FILE:LINE in FUNCTION", a buffer it keeps alive; NULL: none). */
LB_EXPORT void leakbound_python_tracer(int mode) {
  atomic_store(&g_python_tracer, mode >= 0);
  atomic_store(&g_python_tracing, mode > 0);
  if (mode <= 0) t_python_where = NULL;
}

LB_EXPORT int leakbound_python_sites_waiting(void) {
  return atomic_load_explicit(&g_sites_waiting, memory_order_relaxed);
}

LB_EXPORT void leakbound_python_where(const char* where) { t_python_where = where; }
