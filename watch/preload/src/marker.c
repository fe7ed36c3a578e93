/* Step markers and the channel of the `leakbound watch` preload:
 * leakbound_step() samples the counters and sends them to the watcher as
 * fixed-size records on this process's own connection to the socket named by
 * LEAKBOUND_WATCH_SOCKET; an optional timer thread does the same every
 * LEAKBOUND_WATCH_INTERVAL_NS. Every process of the job reports on its own
 * connection (docs/watch.md, "Process trees"): the preload connects when it
 * starts in a program image and again in a forked child (which never writes
 * into its parent's connection). A process that marks no step of its own
 * samples itself at the job's clock (channel.h). What the marker itself
 * allocates (snprintf's, if any) is excluded from the counts. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "heap_core.h"
#include "leakbound/watch/heap.h"
#include "preload_internal.h"

static _Atomic int g_fd = -1;
static ino_t g_channel_ino; /* the connection's identity (its inode), checked per send */
static struct sockaddr_un g_watcher;  /* LEAKBOUND_WATCH_SOCKET */
static int g_have_watcher;
/* Held across a send's identity check and the send, and by the dup2 / dup3 hooks, so that no
 * dup2 onto the channel's number can land between the two. */
static pthread_mutex_t g_channel_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_followed;
static pid_t g_pid;
static _Atomic uint64_t g_forks;
static uint64_t g_steps; /* guarded by g_marker_lock */
static uint64_t g_ticks;
static uint64_t g_samples;          /* STEP + TICK records sent (guarded by g_marker_lock) */
static uint64_t g_census_unit = 1;  /* samples between census points (channel.h) */
/* Whether the last census found heap survivors a census interval old or more, born since the
 * first census point, in two cohorts or more (AgedSurvivors; guarded by g_marker_lock). While
 * none did, no heap call site is asked for its callers, samples and census
 * (LeakboundSiteFramesDue): without such survivors the census judge has no growth to name a site
 * for, and a site whose live bytes merely wander (four threads at one malloc, each with a block
 * in flight at a sample) paid a census at every allocation (the 4-thread loop of watch/bench,
 * call sites on: ~1.5x the time without the census; docs/watch.md, "The fifteenth round"). */
static int g_aged_survivors;
static pthread_mutex_t g_marker_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held while one probe state goes out in pieces (leakbound_probe_state). */
static pthread_mutex_t g_pieces_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(leakbound_watch_sampler) g_device_sampler; /* the CUDA injection's, or NULL */
static uint64_t g_interval_ns; /* LEAKBOUND_WATCH_INTERVAL_NS: this image's timer, or 0 */
static const _Atomic uint64_t *g_clock_page; /* LEAKBOUND_WATCH_CLOCK, mapped read-only */
LB_HIDDEN const _Atomic uint64_t *_Atomic g_leakbound_job_clock; /* NULL: sampling off */
LB_HIDDEN _Atomic uint64_t g_leakbound_job_seen;

static uint64_t NowNs(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static int Followed(void) {
  return atomic_load_explicit(&g_followed, memory_order_relaxed) && getpid() == g_pid;
}

/* One record, one send: a SOCK_SEQPACKET message is delivered whole or not at
 * all, and MSG_NOSIGNAL turns a vanished parent into EPIPE (we stop reporting)
 * instead of SIGPIPE. */
static int ChannelIntact(int fd) {
  struct stat st;
  return fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == g_channel_ino;
}

/* The ring (channel.h): made with the connection, handed over with the HELLO, then written
 * instead of sending (guarded by g_channel_lock). NULL: every message is sent. */
static leakbound_watch_ring *g_ring;
static int g_ring_fd = -1;       /* the ring's memfd until the HELLO has handed it over */
static uint64_t g_ring_head;     /* the ring's head: this process is its only writer */
static uint64_t g_ring_tail;     /* the watcher's tail as last read */
static uint64_t g_ring_woken_at; /* the head when WAKE was last sent */
static const size_t kRingMapped = LEAKBOUND_WATCH_RING_DATA + LEAKBOUND_WATCH_RING_BYTES;
static const char *g_no_ring; /* why this image sends every message, or NULL */

/* Followed() without its getpid system call (~230 ns on this project's VMs, once per step: 1.5%
 * of the malloc loop of watch/bench under watch), for the markers only (leakbound_step,
 * leakbound_census_due, which a program calls in its own process). A private page that the kernel
 * hands a forked child zero-filled (MADV_WIPEONFORK, Linux 4.14+) holds 1 while this image
 * reports: a child forked behind pthread_atfork (a raw fork or clone system call, _Fork) reads 0
 * and stops, as getpid() != g_pid stops it; AfterForkInChild's Begin sets it again in a child
 * that reports. NULL (getpid each time) when the kernel refuses the page or the advice. The paths
 * a vfork child can reach (the allocation hooks' job-clock sample, close, dup2), where the memory
 * is the parent's, keep Followed(). A limit: a raw clone(CLONE_VM) child that is neither a thread
 * nor a vfork child shares the page too, and its own markers would write into its parent's ring,
 * which getpid stopped (no known program marks steps in one). */
static _Atomic int *g_fork_guard;

static void ArmForkGuard(void) {
  if (!g_fork_guard) {
    /* Only beside a ring: under an address-space limit (MakeRing) no page of the preload's may
     * take what the program would get bare. */
    if (!g_ring) return;
    const long page = syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == -1) return;
    if (syscall(SYS_madvise, page, 4096, MADV_WIPEONFORK) != 0) {
      syscall(SYS_munmap, page, 4096);
      return;
    }
    g_fork_guard = (_Atomic int *)page;
  }
  atomic_store_explicit(g_fork_guard, 1, memory_order_relaxed);
}

static int FollowedByMarker(void) {
  if (!atomic_load_explicit(&g_followed, memory_order_relaxed)) return 0;
  const _Atomic int *guard = g_fork_guard;
  return guard ? atomic_load_explicit(guard, memory_order_relaxed) != 0 : getpid() == g_pid;
}

static void DropRing(void) {
  if (g_ring) syscall(SYS_munmap, g_ring, kRingMapped);
  if (g_ring_fd >= 0) syscall(SYS_close, g_ring_fd);
  g_ring = NULL;
  g_ring_fd = -1;
}

/* A ring for this image's connection; none (every message sent) when the kernel refuses any
 * step (no memfd_create: a seccomp filter), and none under an address-space limit (ulimit -v):
 * its 132 KiB count there, and a program at its limit would run out one allocation earlier than
 * bare (watch.address_space_limit). Raw syscalls: no hook of the preload's sees the mapping. */
static void MakeRing(void) {
  g_no_ring = NULL;
  struct rlimit space;
  if (getrlimit(RLIMIT_AS, &space) == 0 && space.rlim_cur != RLIM_INFINITY) {
    g_no_ring = "an address-space limit (ulimit -v), where the ring's 132 KiB would count";
    return;
  }
  const int fd = (int)syscall(SYS_memfd_create, "leakbound-channel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    g_no_ring = "memfd_create was refused";
    return;
  }
  void *at = MAP_FAILED;
  if (syscall(SYS_ftruncate, fd, (long)kRingMapped) == 0 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
    at = (void *)syscall(SYS_mmap, NULL, kRingMapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (at == MAP_FAILED || (long)at < 0) {
    syscall(SYS_close, fd);
    g_no_ring = "its memory could not be made or mapped";
    return;
  }
  g_ring = (leakbound_watch_ring *)at;
  g_ring->magic = LEAKBOUND_WATCH_MAGIC;
  g_ring->version = LEAKBOUND_WATCH_VERSION;
  g_ring->bytes = LEAKBOUND_WATCH_RING_BYTES;
  g_ring_fd = fd;
  g_ring_head = g_ring_tail = g_ring_woken_at = 0;
}

/* One message on the connection, with the ring's descriptor while it is not handed over (the
 * HELLO); 0 once the channel is gone. The descriptor is checked first: a program that closed it
 * behind the hooks below (a raw close_range syscall) and opened its own socket at that number
 * must never receive a record. Under g_channel_lock. */
static int SendOnConnection(const void *bytes, size_t size, int flags) {
  const int fd = atomic_load(&g_fd);
  if (!ChannelIntact(fd)) return 0;
  struct iovec part = {(void *)bytes, size};
  struct msghdr message;
  memset(&message, 0, sizeof message);
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  if (g_ring_fd >= 0) {
    memset(&control, 0, sizeof control);
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(header), &g_ring_fd, sizeof(int));
  }
  for (;;) {
    if (sendmsg(fd, &message, MSG_NOSIGNAL | flags) >= 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN && (flags & MSG_DONTWAIT)) return 1; /* a WAKE: enough are waiting */
    if (g_ring_fd >= 0 && errno != EPIPE) {
      /* The descriptor could not go (ETOOMANYREFS: too many in flight to a busy watcher): no
       * ring, the message again without it, and every message sent from here. */
      DropRing();
      g_no_ring = "its descriptor could not be handed over";
      message.msg_control = NULL;
      message.msg_controllen = 0;
      continue;
    }
    if (g_ring_fd >= 0) DropRing();
    return 0;
  }
  if (g_ring_fd >= 0) { /* handed over: the watcher holds it now */
    syscall(SYS_close, g_ring_fd);
    g_ring_fd = -1;
  }
  return 1;
}

/* WAKE (channel.h): the ring is filling. 0 once the channel is gone. */
static int WakeWatcher(void) {
  leakbound_watch_bundle wake = {LEAKBOUND_WATCH_MAGIC, LEAKBOUND_WATCH_VERSION,
                                 LEAKBOUND_WATCH_WAKE, (uint32_t)g_pid, 0, 0};
  g_ring_woken_at = g_ring_head;
  return SendOnConnection(&wake, sizeof wake, MSG_DONTWAIT);
}

/* Writes one message into the ring; when it has no room, wakes the watcher and waits for it
 * (as a send waits for room in the socket's buffer). 0 once the channel is gone. */
static int RingPut(const void *bytes, size_t size) {
  const uint64_t data = LEAKBOUND_WATCH_RING_BYTES;
  const size_t need = sizeof(leakbound_watch_part) + ((size + 7) & ~(size_t)7);
  unsigned char *base = (unsigned char *)g_ring + LEAKBOUND_WATCH_RING_DATA;
  for (int waited = 0;; ++waited) {
    const uint64_t at = g_ring_head & (data - 1);
    const uint64_t skip = data - at < need ? data - at : 0;
    if (g_ring_head + skip + need - g_ring_tail > data) {
      g_ring_tail = __atomic_load_n(&g_ring->tail, __ATOMIC_ACQUIRE);
      if (g_ring_head + skip + need - g_ring_tail > data) {
        if ((waited % 64 == 0 && !WakeWatcher()) || !Followed()) return 0;
        /* A watcher that never mapped the ring (one that could not take its descriptor ends
         * the connection, and the WAKE above fails; one of another version would not) never
         * reads it: after ~2 s of waiting, stop reporting rather than wait forever. Generous: a
         * watcher on a loaded machine may take a while to accept a new connection. */
        if (waited >= 16384 && !__atomic_load_n(&g_ring->read_by, __ATOMIC_ACQUIRE)) return 0;
        const struct timespec pause = {0, 100 * 1000};
        nanosleep(&pause, NULL);
        continue;
      }
    }
    if (skip) {
      const leakbound_watch_part filler = {LEAKBOUND_WATCH_RING_SKIP, 0};
      memcpy(base + at, &filler, sizeof filler);
      g_ring_head += skip;
    }
    unsigned char *to = base + (g_ring_head & (data - 1));
    const leakbound_watch_part part = {(uint32_t)size, 0};
    memcpy(to, &part, sizeof part);
    memcpy(to + sizeof part, bytes, size);
    memset(to + sizeof part + size, 0, need - sizeof part - size);
    g_ring_head += need;
    __atomic_store_n(&g_ring->head, g_ring_head, __ATOMIC_RELEASE);
    /* Half full (as last seen) and not woken for a quarter of the ring since: WAKE. */
    if (g_ring_head - g_ring_tail >= data / 2 && g_ring_head - g_ring_woken_at >= data / 4) {
      g_ring_tail = __atomic_load_n(&g_ring->tail, __ATOMIC_ACQUIRE);
      if (g_ring_head - g_ring_tail >= data / 2) return WakeWatcher();
    }
    return 1;
  }
}

/* One message: into the ring once the HELLO has handed it over, else sent. Stops following when
 * the channel is gone. */
static void SendNow(const void *bytes, size_t size) {
  pthread_mutex_lock(&g_channel_lock); /* a dup2 onto the channel's number waits for the send */
  const int sent = g_ring && g_ring_fd < 0 ? RingPut(bytes, size) : SendOnConnection(bytes, size, 0);
  if (!sent) atomic_store(&g_followed, 0);
  pthread_mutex_unlock(&g_channel_lock);
}

/* A marker's messages (channel.h, BUNDLE), sent when it ends or when the next does not fit.
 * Filled only by the thread that holds g_marker_lock inside MarkLocked (t_bundling); any other
 * send goes at once. */
static union {
  leakbound_watch_bundle head;
  unsigned char bytes[LEAKBOUND_WATCH_BUNDLE_BYTES];
} g_bundle;
static size_t g_bundle_used = sizeof(leakbound_watch_bundle);
static uint32_t g_bundle_parts;
static __thread int t_bundling;

static void SendBundle(void) {
  if (g_bundle_parts == 1) { /* one message: as itself */
    leakbound_watch_part part;
    memcpy(&part, g_bundle.bytes + sizeof g_bundle.head, sizeof part);
    SendNow(g_bundle.bytes + sizeof g_bundle.head + sizeof part, part.size);
  } else if (g_bundle_parts > 1) {
    g_bundle.head.magic = LEAKBOUND_WATCH_MAGIC;
    g_bundle.head.version = LEAKBOUND_WATCH_VERSION;
    g_bundle.head.kind = LEAKBOUND_WATCH_BUNDLE;
    g_bundle.head.pid = (uint32_t)g_pid;
    g_bundle.head.count = g_bundle_parts;
    g_bundle.head.seq = 0;
    SendNow(g_bundle.bytes, g_bundle_used);
  }
  g_bundle_used = sizeof g_bundle.head;
  g_bundle_parts = 0;
}

/* One message: into the marker's bundle while it fills one, else sent now. */
static void SendBytes(const void *bytes, size_t size) {
  if (!t_bundling || g_ring) { /* a ring: each message costs a copy, not a send */
    SendNow(bytes, size);
    return;
  }
  const size_t need = sizeof(leakbound_watch_part) + ((size + 7) & ~(size_t)7);
  if (sizeof g_bundle.head + need > sizeof g_bundle) { /* a full batch: on its own, in order */
    SendBundle();
    SendNow(bytes, size);
    return;
  }
  if (g_bundle_used + need > sizeof g_bundle) SendBundle();
  const leakbound_watch_part part = {(uint32_t)size, 0};
  unsigned char *at = g_bundle.bytes + g_bundle_used;
  memcpy(at, &part, sizeof part);
  memcpy(at + sizeof part, bytes, size);
  memset(at + sizeof part + size, 0, need - sizeof part - size);
  g_bundle_used += need;
  ++g_bundle_parts;
}

static void Send(leakbound_watch_record *record) {
  record->magic = LEAKBOUND_WATCH_MAGIC;
  record->version = LEAKBOUND_WATCH_VERSION;
  record->pid = (uint32_t)g_pid;
  if (record->time_ns == 0) record->time_ns = NowNs();
  SendBytes(record, sizeof *record);
}

/* Cut at a character boundary when too long: a UTF-8 sequence is never split. */
static void CopyText(char *out, const char *text) {
  size_t n = strlen(text);
  if (n >= LEAKBOUND_WATCH_TEXT) {
    n = LEAKBOUND_WATCH_TEXT - 1;
    while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80) --n;
  }
  memcpy(out, text, n);
  out[n] = '\0';
}

static void Sample(leakbound_watch_counters *out) {
  leakbound_heap_stats stats;
  leakbound_heap_read(&stats);
  out->heap_bytes = stats.live_bytes;
  out->heap_allocations = stats.live_allocations;
  out->heap_peak_bytes = stats.peak_bytes;
  out->total_allocations = stats.total_allocations;
  out->untracked_allocations = stats.untracked_allocations;
  out->mapped_bytes = LeakboundMappedBytes();
  out->forks = atomic_load(&g_forks);
  leakbound_heap_reset_peak();
}

/* "libfoo.so+0x1234": the module and the pc's offset from its load bias, i.e. the address
 * `addr2line -f -e libfoo.so 0x1234` symbolises. Found with _dl_find_object (glibc 2.35+:
 * lock-free, no allocation, a binary search over the loaded objects). dladdr would add the
 * nearest exported symbol, but it scans a module's whole symbol table for each call: 67% of a
 * PyTorch run under watch went there (thousands of sites named once each, libtorch_cpu has
 * ~10^5 symbols), and libtorch's and python3's own functions are not exported anyway. */
/* NAME text: "PATH+0xOFFSET" (the module's full path, for the watcher's symboliser: the main
 * program's from /proc/self/exe), or "MODULE+0xOFFSET" when the path does not fit; code in no
 * module (a JIT's output) is "[anonymous]+0xADDRESS", its own address, so that two such call
 * sites keep names of their own (one name "?" summed them into one row). */
static void NameOf(uintptr_t pc, char *out) {
  if (pc == LEAKBOUND_OVERFLOW_PC) { /* its samples' frames say where */
    CopyText(out, "[call sites past the table]");
    return;
  }
  const char *path = NULL;
  uintptr_t bias = 0;
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
  struct dl_find_object found;
  if (_dl_find_object((void *)pc, &found) == 0 && found.dlfo_link_map) {
    path = found.dlfo_link_map->l_name;
    bias = (uintptr_t)found.dlfo_link_map->l_addr;
    if (!path || !*path) path = program_invocation_name; /* the main program */
  }
#else
  Dl_info info;
  memset(&info, 0, sizeof info);
  if (dladdr((void *)pc, &info) && info.dli_fname) {
    path = info.dli_fname;
    bias = (uintptr_t)info.dli_fbase;
  }
#endif
  if (!path) {
    char text[48];
    snprintf(text, sizeof text, "[anonymous]+0x%lx", (unsigned long)pc);
    CopyText(out, text);
    return;
  }
  static char self[LEAKBOUND_WATCH_TEXT];
  if (path == program_invocation_name) {
    if (!self[0]) {
      const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
      self[n > 0 ? n : 0] = 0;
    }
    if (self[0]) path = self;
  }
  const char *module = strrchr(path, '/');
  module = module ? module + 1 : path;
  char text[LEAKBOUND_WATCH_TEXT];
  const int n = snprintf(text, sizeof text, "%s+0x%lx", path, (unsigned long)(pc - bias));
  if (path[0] != '/' || n < 0 || n >= (int)sizeof text) {
    snprintf(text, sizeof text, "%s+0x%lx", module[0] ? module : "?", (unsigned long)(pc - bias));
  }
  CopyText(out, text);
}

/* The SITES message being filled at a marker (guarded by g_marker_lock). */
static leakbound_watch_site_batch g_site_batch;

/* The NAMES message being filled (g_marker_lock), sent before any SITES message. */
static leakbound_watch_name_batch g_name_batch;
static size_t g_name_bytes;

static void SendNames(void) {
  if (g_name_batch.count == 0) return;
  g_name_batch.magic = LEAKBOUND_WATCH_MAGIC;
  g_name_batch.version = LEAKBOUND_WATCH_VERSION;
  g_name_batch.kind = LEAKBOUND_WATCH_NAMES;
  g_name_batch.pid = (uint32_t)g_pid;
  SendBytes(&g_name_batch, offsetof(leakbound_watch_name_batch, bytes) + g_name_bytes);
  g_name_batch.count = 0;
  g_name_bytes = 0;
}

static void AddName(uint32_t site, uintptr_t pc) {
  char text[LEAKBOUND_WATCH_TEXT];
  NameOf(pc, text);
  const uint16_t length = (uint16_t)strlen(text); /* < LEAKBOUND_WATCH_TEXT */
  const size_t need = sizeof site + sizeof length + length;
  if (g_name_bytes + need > LEAKBOUND_WATCH_NAME_BYTES) SendNames();
  unsigned char *at = g_name_batch.bytes + g_name_bytes;
  memcpy(at, &site, sizeof site);
  memcpy(at + sizeof site, &length, sizeof length);
  memcpy(at + sizeof site + sizeof length, text, length);
  g_name_bytes += need;
  ++g_name_batch.count;
}

static void SendBatch(leakbound_watch_kind kind) {
  if (kind == LEAKBOUND_WATCH_SITES) SendNames(); /* a site's name before its first entry */
  g_site_batch.magic = LEAKBOUND_WATCH_MAGIC;
  g_site_batch.version = LEAKBOUND_WATCH_VERSION;
  g_site_batch.kind = (uint16_t)kind;
  g_site_batch.pid = (uint32_t)g_pid;
  const size_t size = offsetof(leakbound_watch_site_batch, entries) +
                      g_site_batch.count * sizeof(leakbound_watch_site_entry);
  SendBytes(&g_site_batch, size);
  g_site_batch.count = 0;
}

static void SendSiteBatch(void) {
  if (g_site_batch.count > 0) SendBatch(LEAKBOUND_WATCH_SITES);
}

/* A site's callers as FRAME records; replace: they take the place of those sent before (the
 * stack most of its surviving samples came from). */
static void SendFrames(uint32_t site, const uintptr_t *frames, int n, int scanned_from,
                       int replace) {
  for (int i = 0; i < n; ++i) {
    leakbound_watch_record frame;
    memset(&frame, 0, sizeof frame);
    frame.kind = LEAKBOUND_WATCH_FRAME;
    frame.site = site;
    frame.seq = (uint64_t)i + 1;
    frame.site_pc = frames[i];
    frame.values[0] = i >= scanned_from;
    frame.values[1] = replace ? (uint64_t)n : 0;
    NameOf(frames[i], frame.text);
    Send(&frame);
  }
}

static void AddSite(uint32_t site, uintptr_t pc, int64_t bytes, int64_t allocations,
                    int first_time, void *context) {
  (void)context;
  if (first_time) AddName(site, pc); /* sent before the batch that holds its first entry */
  /* A heap site is asked while the heap holds aged survivors (g_aged_survivors); a mapping's or a
   * device allocation's is asked as before: the heap's census does not see them. */
  if (LeakboundSiteFramesDue(site, g_aged_survivors || LeakboundSiteRole(site) != 0)) {
    uintptr_t frames[LEAKBOUND_WATCH_FRAMES];
    int scanned_from = 0;
    const int n = LeakboundSiteFrames(site, frames, LEAKBOUND_WATCH_FRAMES, &scanned_from);
    SendFrames(site, frames, n, scanned_from, 0);
  }
  LeakboundSiteSamplesRead samples;
  if (LeakboundSiteSamplesDue(site, bytes, &samples)) {
    if (samples.restacked) {
      SendFrames(site, samples.frames, samples.frame_count, samples.scanned_from, 1);
    }
    if (samples.where != NULL) {
      leakbound_watch_record line;
      memset(&line, 0, sizeof line);
      line.kind = LEAKBOUND_WATCH_PYTHON;
      line.site = site;
      line.site_pc = pc;
      snprintf(line.text, sizeof line.text, "%s", samples.where);
      line.values[0] = (uint64_t)samples.live_here;
      line.values[1] = (uint64_t)samples.live;
      line.values[2] = (uint64_t)samples.taken;
      Send(&line);
    }
  }
  leakbound_watch_site_entry *entry = &g_site_batch.entries[g_site_batch.count++];
  entry->site = site;
  entry->reserved = (uint32_t)LeakboundSiteRole(site);
  entry->bytes = bytes > 0 ? (uint64_t)bytes : 0;
  entry->allocations = allocations > 0 ? (uint64_t)allocations : 0;
  if (g_site_batch.count == LEAKBOUND_WATCH_SITE_BATCH) SendSiteBatch();
}

/* One entry of a SITE_CENSUS batch (g_site_batch, seq already set by SendCensus). */
static void AddSiteCohort(uint32_t site, uint32_t cohort, int64_t bytes, int64_t blocks,
                          void *context) {
  (void)context;
  leakbound_watch_site_entry *entry = &g_site_batch.entries[g_site_batch.count++];
  entry->site = site;
  entry->reserved = cohort;
  entry->bytes = (uint64_t)bytes;
  entry->allocations = (uint64_t)blocks;
  if (g_site_batch.count == LEAKBOUND_WATCH_SITE_BATCH) SendBatch(LEAKBOUND_WATCH_SITE_CENSUS);
}

/* Whether a census (n cohorts, the last ending now) holds aged survivors: born in cohort 1 or
 * later (cohort 0 is everything before the first census point: the program's start-up, the
 * imports) and before the cohort ending now, in two cohorts at least, as a leak leaves them (one
 * cohort's: a one-time event, such as the threads a program starts after the first sample, each
 * with its thread-local storage). */
static int AgedSurvivors(const leakbound_heap_cohort *cohorts, int n) {
  int aged_cohorts = 0;
  for (int k = 1; k + 1 < n && k < LEAKBOUND_HEAP_COHORTS; ++k) {
    aged_cohorts += cohorts[k].bytes > 0 || cohorts[k].blocks > 0;
  }
  return aged_cohorts >= 2;
}

/* The census after this sample (channel.h: census points), read by the caller (n cohorts): the
 * non-empty cohorts in SITES-shaped batches, then a new cohort begins for what the next step
 * allocates. Under g_marker_lock. */
static void SendCensus(uint64_t seq, const leakbound_heap_cohort *cohorts, int n) {
  leakbound_watch_site_batch *batch = &g_site_batch;
  batch->count = 0;
  batch->seq = seq;
  int sent_any = 0;
  for (int k = 0; k < n && k < LEAKBOUND_HEAP_COHORTS; ++k) {
    if (cohorts[k].bytes == 0 && cohorts[k].blocks == 0) continue;
    leakbound_watch_site_entry *entry = &batch->entries[batch->count++];
    entry->site = (uint32_t)k;
    entry->reserved = 0;
    entry->bytes = (uint64_t)cohorts[k].bytes;
    entry->allocations = (uint64_t)cohorts[k].blocks;
    if (batch->count == LEAKBOUND_WATCH_SITE_BATCH) {
      SendBatch(LEAKBOUND_WATCH_CENSUS);
      sent_any = 1;
    }
  }
  if (batch->count > 0 || !sent_any) SendBatch(LEAKBOUND_WATCH_CENSUS); /* even when empty */
  if (g_leakbound_sites_on) {
    LeakboundSitesCensus((unsigned)leakbound_heap_cohort_now(), AddSiteCohort, NULL);
    if (batch->count > 0) SendBatch(LEAKBOUND_WATCH_SITE_CENSUS);
  }
  leakbound_heap_next_cohort();
}

/* 1 when the next marker is a census point: a Python marker collects cyclic garbage first, so
 * that what an earlier block left for the collector is not counted as surviving. */
LB_EXPORT int leakbound_census_due(void) {
  if (!FollowedByMarker()) return 0;
  pthread_mutex_lock(&g_marker_lock);
  const int due = (g_samples + 1) % g_census_unit == 0;
  pthread_mutex_unlock(&g_marker_lock);
  return due;
}

/* One sample and what goes with it, under g_marker_lock. `at_clock`: a sample at the job's clock,
 * taken inside an allocation call of the program (the device sampler is not called there). */
/* With a ring, no send checks the descriptor at each step: every kRingCheckEvery samples the
 * marker does, so that a program that closed it behind the hooks (a raw close_range) stops being
 * followed within a few steps, as a send would have found (watch.hostile_raw_close). */
enum { kRingCheckEvery = 8 };
static int ChannelStillOurs(void) {
  if (!g_ring || g_samples % kRingCheckEvery != 0) return 1;
  pthread_mutex_lock(&g_channel_lock);
  const int ours = ChannelIntact(atomic_load(&g_fd));
  pthread_mutex_unlock(&g_channel_lock);
  if (!ours) atomic_store(&g_followed, 0);
  return ours;
}

static void MarkLocked(leakbound_watch_kind kind, int at_clock) {
  if (!ChannelStillOurs()) return;
  LeakboundSitesStart(); /* call sites from the first sample (preload_internal.h) */
  t_bundling = 1;
  leakbound_watch_record record;
  memset(&record, 0, sizeof record);
  record.kind = (uint16_t)kind;
  record.site = at_clock ? 1 : 0;
  record.seq = kind == LEAKBOUND_WATCH_STEP ? g_steps++ : g_ticks++;
  Sample(&record.counters); /* first: the site scan below must not delay the
                               sample */
  record.time_ns = NowNs();
  record.values[0] = LeakboundSitesDropped();
  record.values[1] = LeakboundMappedDropped();
  /* At a census point the census is read before the sites' visit, so that the visit asks by this
   * census (g_aged_survivors), not the one a census unit before. */
  leakbound_heap_cohort cohorts[LEAKBOUND_HEAP_COHORTS];
  int cohort_count = 0;
  const int census_point = (g_samples + 1) % g_census_unit == 0;
  if (census_point) {
    cohort_count = leakbound_heap_census(cohorts, LEAKBOUND_HEAP_COHORTS);
    g_aged_survivors = AgedSurvivors(cohorts, cohort_count);
  }
  if (g_leakbound_sites_on) {
    g_site_batch.seq = record.seq;
    g_site_batch.count = 0;
    LeakboundSitesVisitChanged(AddSite, NULL);
    SendSiteBatch();
  }
  ++g_samples;
  if (census_point) {
    SendCensus(record.seq, cohorts, cohort_count);
    if (g_samples >= (uint64_t)LEAKBOUND_WATCH_CENSUS_POINTS * g_census_unit) g_census_unit *= 2;
  }
  leakbound_watch_sampler sampler = at_clock ? NULL : atomic_load(&g_device_sampler);
  if (sampler) {
    leakbound_watch_record device;
    memset(&device, 0, sizeof device);
    device.kind = LEAKBOUND_WATCH_DEVICE;
    device.seq = record.seq;
    if (sampler(device.values, LEAKBOUND_WATCH_VALUES) > 0) Send(&device);
  }
  Send(&record);
  SendBundle();
  t_bundling = 0;
}

static void Mark(leakbound_watch_kind kind) {
  leakbound_heap_exclude_begin();
  pthread_mutex_lock(&g_marker_lock);
  MarkLocked(kind, 0);
  pthread_mutex_unlock(&g_marker_lock);
  leakbound_heap_exclude_end();
}

/* Called by the allocation hooks when the job's clock moved (preload_internal.h): a sample now,
 * unless this thread is inside the preload or another thread is sampling. */
LB_HIDDEN __attribute__((noinline, cold)) void LeakboundJobClockSample(void) {
  if (leakbound_heap_excluded() || !Followed()) return;
  const _Atomic uint64_t *clock = atomic_load(&g_leakbound_job_clock);
  if (!clock) return;
  /* Inside the program's malloc: no cancellation point (send) may unwind it with the lock held,
   * and errno is the allocation's, not the send's. */
  const int saved_errno = errno;
  int cancel_state;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  leakbound_heap_exclude_begin();
  if (pthread_mutex_trylock(&g_marker_lock) == 0) {
    atomic_store(&g_leakbound_job_seen, atomic_load(clock));
    if (atomic_load(&g_leakbound_job_clock)) MarkLocked(LEAKBOUND_WATCH_TICK, 1);
    pthread_mutex_unlock(&g_marker_lock);
  }
  leakbound_heap_exclude_end();
  pthread_setcancelstate(cancel_state, NULL);
  errno = saved_errno;
}

/* ---- exported markers (leakbound/watch/step.h, the Python module, the NVTX
 * injection) ---- */

static void SendHello(void);
static void SendText(uint16_t kind, const char *text);

/* Set while the --interval timer thread samples; cleared by the program's first own step. */
static _Atomic int g_timer_on;

/* The series starts again (HELLO): samples so far were at the job's clock or on the timer, and
 * the process marks its own steps from now on (a series is steps, or timer / clock samples, never
 * both); the census and the call sites start again with it. */
static void RestartSeries(const char *why) {
  leakbound_heap_exclude_begin();
  pthread_mutex_lock(&g_marker_lock);
  if (g_samples > 0) {
    g_steps = g_ticks = g_samples = 0;
    g_census_unit = 1;
    g_aged_survivors = 0;
    leakbound_heap_census_start();
    LeakboundSitesForget(0);
    SendHello();
    if (why) SendText(LEAKBOUND_WATCH_NOTE, why);
  }
  pthread_mutex_unlock(&g_marker_lock);
  leakbound_heap_exclude_end();
}

LB_EXPORT void leakbound_step(void) {
  if (!FollowedByMarker()) return;
  if (atomic_exchange(&g_leakbound_job_clock, NULL) != NULL) {
    LeakboundHeapHoldFastPath(0);
    RestartSeries(NULL);
  }
  if (atomic_exchange(&g_timer_on, 0)) {
    RestartSeries("interval: the program marks its own steps, so the timer stopped at its first "
                  "step and its series is those steps (the timer samples before it were dropped)");
  }
  Mark(LEAKBOUND_WATCH_STEP);
}

/* A text record of `kind` (ROLE, NOTE), sent outside the heap's counts. */
static void SendText(uint16_t kind, const char *text) {
  if (!Followed() || !text) return;
  leakbound_heap_exclude_begin();
  leakbound_watch_record record;
  memset(&record, 0, sizeof record);
  record.kind = kind;
  CopyText(record.text, text);
  Send(&record);
  leakbound_heap_exclude_end();
}

/* What this process is in the job ("DataLoader worker 1", "rank 0"), for the report. */
LB_EXPORT void leakbound_role(const char *text) { SendText(LEAKBOUND_WATCH_ROLE, text); }

/* A line for the report ("step-on: patched torch.optim.Optimizer.step and 12
 * overrides"). */
LB_EXPORT void leakbound_note(const char *text) { SendText(LEAKBOUND_WATCH_NOTE, text); }

/* One CUDA injection per process (channel.h): a second copy of the library is
 * told so. */
static _Atomic int g_device_claimed;
LB_EXPORT int leakbound_watch_claim_device(void) {
  if (!Followed()) return 0;
  return atomic_exchange(&g_device_claimed, 1) ? 2 : 1;
}

/* The CUDA injection's device sampler, called at every marker from now on
 * (channel.h). */
LB_EXPORT void leakbound_watch_set_device_sampler(leakbound_watch_sampler sampler) {
  if (Followed()) atomic_store(&g_device_sampler, sampler);
}

/* A probe's state for the report ("cupti", "active" / "unavailable: <why>"), in
 * pieces of at most LEAKBOUND_WATCH_TEXT - 1 bytes. */
LB_EXPORT void leakbound_probe_state(const char *probe, const char *state) {
  if (!Followed() || !probe || !state) return;
  leakbound_heap_exclude_begin();
  char text[4096];
  snprintf(text, sizeof text, "%s\t%s", probe, state);
  const size_t piece = LEAKBOUND_WATCH_TEXT - 1;
  const size_t length = strlen(text);
  /* The pieces of one state go out together: the watcher joins pieces until the last, so two
   * threads' states must not interleave (hostile_threads_probe). Not g_marker_lock: the CUDA
   * injection reports states while it holds that. */
  pthread_mutex_lock(&g_pieces_lock);
  for (size_t at = 0; at < length || at == 0; at += piece) {
    leakbound_watch_record record;
    memset(&record, 0, sizeof record);
    record.kind = LEAKBOUND_WATCH_PROBE;
    const size_t n = length - at < piece ? length - at : piece;
    memcpy(record.text, text + at, n);
    record.site = at + n < length ? 1 : 0;
    Send(&record);
    if (length == 0) break;
  }
  pthread_mutex_unlock(&g_pieces_lock);
  leakbound_heap_exclude_end();
}

/* One exact counter a framework reads at the step ("torch.allocated_bytes"):
 * call it just before the marker; the value belongs to the step that marker
 * ends. */
LB_EXPORT void leakbound_note_counter(const char *name, unsigned long long value) {
  if (!Followed() || !name) return;
  leakbound_watch_record record;
  memset(&record, 0, sizeof record);
  record.kind = LEAKBOUND_WATCH_COUNTER;
  CopyText(record.text, name);
  record.values[0] = value;
  Send(&record);
}

/* 1 in the process `leakbound watch` follows. */
LB_EXPORT int leakbound_watching(void) { return Followed(); }

/* ---- timer sampling (--interval)
 * ---------------------------------------------------------- */

static void *TimerThread(void *unused) {
  (void)unused;
  leakbound_heap_exclude_begin(); /* nothing this thread does is the program's
                                   */
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  while (Followed() && atomic_load(&g_timer_on)) {
    uint64_t ns = (uint64_t)next.tv_nsec + g_interval_ns;
    next.tv_sec += (time_t)(ns / 1000000000ull);
    next.tv_nsec = (long)(ns % 1000000000ull);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
    }
    if (Followed() && atomic_load(&g_timer_on)) Mark(LEAKBOUND_WATCH_TICK);
  }
  return NULL;
}

/* ---- the channel's descriptor ------------------------------------------------------------
 * A program may close every descriptor it did not open (closefrom(3), close_range, a loop of
 * close) or dup2 onto any number. In the followed process these hooks keep the channel out of
 * the way, as if it were not there, which is what the program sees when run bare: close() of its
 * number fails with EBADF (it is not one of the program's descriptors), closefrom / close_range
 * close everything around it, and dup2 / dup3 onto its number first move the channel to another
 * number. Raw syscalls pass by the hooks; SendNow's identity check then stops the reports
 * (the watcher says the channel was lost) rather than write into the program's own descriptor. */
static int OurDescriptor(int fd) { return fd >= 0 && fd == atomic_load(&g_fd) && Followed(); }

static int RawCloseRange(unsigned first, unsigned last, int flags) {
#ifdef SYS_close_range
  return (int)syscall(SYS_close_range, first, last, flags);
#else
  (void)first, (void)last, (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

LB_EXPORT int close(int fd) {
  if (OurDescriptor(fd)) {
    errno = EBADF;
    return -1;
  }
  return (int)syscall(SYS_close, fd);
}

LB_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  const int fd = atomic_load(&g_fd);
  if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last && Followed()) {
    int result = 0;
    if ((unsigned)fd > first) result = RawCloseRange(first, (unsigned)fd - 1, flags);
    if (result == 0 && (unsigned)fd < last) result = RawCloseRange((unsigned)fd + 1, last, flags);
    return result;
  }
  return RawCloseRange(first, last, flags);
}

LB_EXPORT void closefrom(int lowest) {
  if (lowest < 0) lowest = 0;
  if (close_range((unsigned)lowest, ~0u, 0) == 0) return;
  /* No close_range (kernel < 5.9): every descriptor up to the table's size, the hook's way. */
  const long most = sysconf(_SC_OPEN_MAX);
  for (long d = lowest; d < most; ++d) close((int)d);
}

/* Moves the channel off `wanted` before the program dup2s onto it. 0: go on with the dup2. */
static int MoveChannelOff(int wanted) {
  if (!OurDescriptor(wanted)) return 0;
  const int moved = fcntl(wanted, F_DUPFD_CLOEXEC, wanted + 1); /* as Connect made it */
  if (moved < 0) {
    atomic_store(&g_followed, 0); /* no room: the program's dup2 wins, the reports stop */
    return 0;
  }
  atomic_store(&g_fd, moved);
  return 0;
}

/* dup3 onto new_fd, the channel moved off it first. The lock is taken only in the followed
 * process and only for the channel's number: a forked child (often between fork and exec, with
 * the lock possibly held by a thread that does not exist in it) never takes it. */
static int DupOnto(int old_fd, int new_fd, int flags) {
  if (!OurDescriptor(new_fd)) return (int)syscall(SYS_dup3, old_fd, new_fd, flags);
  pthread_mutex_lock(&g_channel_lock);
  MoveChannelOff(new_fd);
  const int result = (int)syscall(SYS_dup3, old_fd, new_fd, flags);
  pthread_mutex_unlock(&g_channel_lock);
  return result;
}

LB_EXPORT int dup2(int old_fd, int new_fd) {
  if (old_fd == new_fd) return fcntl(old_fd, F_GETFD) < 0 ? -1 : new_fd; /* as dup2 does */
  return DupOnto(old_fd, new_fd, 0);
}

LB_EXPORT int dup3(int old_fd, int new_fd, int flags) {
  if (old_fd == new_fd) return (int)syscall(SYS_dup3, old_fd, new_fd, flags); /* EINVAL */
  return DupOnto(old_fd, new_fd, flags);
}

/* ---- lifetime
 * -----------------------------------------------------------------------------
 */

static long EnvNumber(const char *name, long fallback) {
  const char *text = getenv(name);
  if (!text || !*text) return fallback;
  char *end = NULL;
  long value = strtol(text, &end, 10);
  return (end && *end == '\0') ? value : fallback;
}

/* This image's connection to the watcher, on a high descriptor (out of the way of the numbers a
 * program opens: open() returns the lowest free one, and bare, these are free), close-on-exec
 * (an exec'd image connects again). -1 when there is no watcher to reach. */
static int Connect(void) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  while (connect(fd, (const struct sockaddr *)&g_watcher, sizeof g_watcher) != 0) {
    if (errno == EINTR) continue;
    syscall(SYS_close, fd);
    return -1;
  }
  struct rlimit files;
  long high = 1000;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
      (long)files.rlim_cur - 1 < high) {
    high = (long)files.rlim_cur - 1;
  }
  if (high < 10) high = 10;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, high);
  if (moved < 0) moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (moved >= 0) {
    syscall(SYS_close, fd);
    fd = moved;
  }
  return fd;
}

static int g_origin;
static uint64_t g_fork_index; /* in a forked child: which fork of its parent it is (1-based) */
static uint64_t g_parent_pid; /* when this image began (a fork's parent may exit first) */
/* Set by the forking thread before fork: what its child will be. Thread-local, so that two
 * threads forking at once each hand their own child its ordinal. */
static __thread uint64_t t_fork_ordinal;
static __thread pid_t t_forking_pid;

/* HELLO: the watcher starts this image's series (again) from here. */
static void SendHello(void) {
  leakbound_watch_record hello;
  memset(&hello, 0, sizeof hello);
  hello.kind = LEAKBOUND_WATCH_HELLO;
  hello.site = (uint32_t)g_origin;
  hello.seq = g_parent_pid;
  hello.values[0] = g_fork_index;
  struct stat exe; /* the program this image runs: watch tells an exec that never connected */
  if (stat("/proc/self/exe", &exe) == 0) {
    hello.values[1] = (uint64_t)exe.st_dev;
    hello.values[2] = (uint64_t)exe.st_ino;
  }
  Sample(&hello.counters);
  CopyText(hello.text, leakbound_heap_state());
  Send(&hello);
}

/* Connects and says hello; from then on this process reports. */
static void Begin(int origin) {
  const int fd = Connect();
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    syscall(SYS_close, fd);
    return;
  }
  g_channel_ino = st.st_ino;
  atomic_store(&g_fd, fd);
  MakeRing(); /* handed over with the HELLO below */
  g_pid = getpid();
  ArmForkGuard();
  g_origin = origin;
  g_parent_pid = origin == LEAKBOUND_WATCH_ORIGIN_FORK ? (uint64_t)t_forking_pid
                                                       : (uint64_t)getppid();
  atomic_store(&g_followed, 1);
  SendHello();
  if (g_no_ring) {
    char text[LEAKBOUND_WATCH_TEXT];
    snprintf(text, sizeof text, "channel: every message sent, no ring (%s)", g_no_ring);
    SendText(LEAKBOUND_WATCH_NOTE, text);
  }
  /* Samples at the job's clock until it marks a step of its own (or has its own timer). */
  if (g_clock_page && g_interval_ns == 0) {
    /* The allocation hooks test the clock on the heap's general path only (front_end.c), so the
     * fast paths are held while it is on: held first, so that a first step on another thread
     * between the two (which takes the clock and lets the hold go) leaves neither behind. */
    LeakboundHeapHoldFastPath(1);
    atomic_store(&g_leakbound_job_seen, atomic_load(g_clock_page));
    atomic_store(&g_leakbound_job_clock, g_clock_page);
  }
}

/* Around fork. No lock is taken before it (a fork from a signal handler that interrupted a
 * thread inside a sample must not wait for that thread); the child, where the other threads do
 * not exist, makes the locks anew and begins as a process of its own: its own connection (the
 * parent's is closed in it, never written to), its own steps, a census from now on, every call
 * site named again. */
static void BeforeFork(void) {
  t_forking_pid = getpid();
  t_fork_ordinal = atomic_fetch_add(&g_forks, 1) + 1;
}

static void AfterForkInParent(void) {
  if (Followed()) {
    leakbound_heap_exclude_begin();
    leakbound_watch_record record;
    memset(&record, 0, sizeof record);
    record.kind = LEAKBOUND_WATCH_FORK;
    record.counters.forks = t_fork_ordinal;
    /* Not when the channel's lock is held: a fork from a signal handler that interrupted this
     * thread's own write would wait for itself (the next marker's counters say the forks). */
    if (t_bundling && !g_ring) {
      Send(&record);
    } else if (pthread_mutex_trylock(&g_channel_lock) == 0) {
      pthread_mutex_unlock(&g_channel_lock);
      Send(&record);
    }
    leakbound_heap_exclude_end();
  }
}

static void AfterForkInChild(void) {
  leakbound_heap_exclude_begin();
  /* A fork while another thread turned call sites on may have copied the switch half done. */
  if (__atomic_load_n(&g_leakbound_sites_on, __ATOMIC_RELAXED)) LeakboundHooksSitesOn();
  pthread_mutex_init(&g_channel_lock, NULL);
  pthread_mutex_init(&g_marker_lock, NULL);
  pthread_mutex_init(&g_pieces_lock, NULL);
  t_bundling = 0; /* a fork from a signal handler inside a marker: its messages are the parent's */
  g_bundle_used = sizeof g_bundle.head;
  g_bundle_parts = 0;
  /* The parent's ring is never written here (its records would be the parent's). */
  DropRing();
  const int inherited = atomic_exchange(&g_fd, -1);
  atomic_store(&g_followed, 0);
  atomic_store(&g_leakbound_job_clock, NULL);
  LeakboundHeapHoldFastPath(0);
  /* Only if it is still the parent's connection: a program may own that number now. */
  if (inherited >= 0 && ChannelIntact(inherited)) syscall(SYS_close, inherited);
  g_steps = g_ticks = g_samples = 0;
  g_census_unit = 1;
  g_aged_survivors = 0;
  g_fork_index = t_fork_ordinal;
  atomic_store(&g_forks, 0);
  atomic_store(&g_device_sampler, NULL);
  atomic_store(&g_device_claimed, 0);
  g_interval_ns = 0; /* the timer thread is not in the child: the job's clock samples it */
  if (g_have_watcher) {
    leakbound_heap_census_start();
    LeakboundSitesForget(1);
    Begin(LEAKBOUND_WATCH_ORIGIN_FORK);
  }
  leakbound_heap_exclude_end();
}

/* The job's clock page (LEAKBOUND_WATCH_CLOCK), mapped read-only; NULL when absent. */
static const _Atomic uint64_t *MapClock(void) {
  const char *path = getenv(LEAKBOUND_WATCH_ENV_CLOCK);
  if (!path || !*path) return NULL;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  void *page = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
  syscall(SYS_close, fd);
  return page == MAP_FAILED ? NULL : (const _Atomic uint64_t *)page;
}

__attribute__((constructor(103))) static void StartWatch(void) {
  const char *sites = getenv(LEAKBOUND_WATCH_ENV_SITES);
  g_leakbound_sites_wanted = !(sites && strcmp(sites, "0") == 0);
  const char *socket_path = getenv(LEAKBOUND_WATCH_ENV_SOCKET);
  if (!socket_path || !*socket_path || strlen(socket_path) >= sizeof g_watcher.sun_path) return;
  leakbound_heap_exclude_begin();
  if (g_leakbound_sites_wanted) LeakboundSitesWarmUp();
  g_watcher.sun_family = AF_UNIX;
  memcpy(g_watcher.sun_path, socket_path, strlen(socket_path) + 1);
  g_have_watcher = 1;
  g_clock_page = MapClock();
  const long interval = EnvNumber(LEAKBOUND_WATCH_ENV_INTERVAL, 0);
  g_interval_ns = interval > 0 ? (uint64_t)interval : 0;
  pthread_atfork(BeforeFork, AfterForkInParent, AfterForkInChild);
  Begin(LEAKBOUND_WATCH_ORIGIN_EXEC);
  if (Followed() && g_interval_ns > 0) {
    pthread_t thread;
    atomic_store(&g_timer_on, 1);
    if (pthread_create(&thread, NULL, TimerThread, NULL) == 0) {
      pthread_detach(thread);
    } else {
      atomic_store(&g_timer_on, 0);
      leakbound_note("interval: could not start the timer thread; no samples will arrive");
    }
  }
  leakbound_heap_exclude_end();
}

/* Before the process ends: until the watcher has read what it wrote (a WAKE, then at most
 * 100 ms). A process that ends within a few milliseconds of its start would otherwise be gone
 * (reaped by its parent) before the watcher accepted its connection, and a process watch cannot
 * see in the job is never judged (a pre-forking server's workers: watch.tree_prefork_leak). */
static void AwaitWatcher(void) { /* in the followed process */
  if (!g_ring || g_ring_fd >= 0) return;
  /* Not when the lock is held: _exit from a signal handler that interrupted this thread's own
   * write would wait for itself. */
  if (pthread_mutex_trylock(&g_channel_lock) != 0) return;
  const uint64_t written = g_ring_head;
  /* Read: mapped by the watcher (so its connection was accepted while this process lived) and
   * its tail at or past what was written here (another thread may write after). */
#define LB_RING_READ()                                             \
  (__atomic_load_n(&g_ring->read_by, __ATOMIC_ACQUIRE) != 0 &&     \
   (int64_t)(__atomic_load_n(&g_ring->tail, __ATOMIC_ACQUIRE) - written) >= 0)
  const int woken = LB_RING_READ() || WakeWatcher();
  pthread_mutex_unlock(&g_channel_lock);
  const struct timespec pause = {0, 50 * 1000}; /* ~100 us with the timer's slack */
  for (int i = 0; woken && i < 1000 && !LB_RING_READ(); ++i) nanosleep(&pause, NULL);
#undef LB_RING_READ
}

static void SayBye(int from_exit);

/* _exit (a forked worker's way out, Python's os._exit, dash's way out of every script): the
 * process says BYE, with its last sample, as exit's destructor below does (without it the
 * watcher took the end for a channel lost before the program ended: every `sh -c` run under
 * dash said so), then what it wrote is read first. glibc's own calls (exit's) do not come here. */
LB_EXPORT void _exit(int status) {
  if (Followed()) {
    SayBye(1);
    AwaitWatcher();
  }
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
LB_EXPORT void _Exit(int status) { _exit(status); }

/* A lock taken from _exit, which a signal handler may call while this very thread holds it (in
 * a marker, in a send): waited for at most 50 ms, so that another thread's marker or send (a few
 * microseconds; a full ring waits for watch) is waited out and this thread's own is not waited
 * on forever. 1 when taken. */
static int LockFromExit(pthread_mutex_t *lock) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += 50 * 1000 * 1000;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_nsec -= 1000000000L;
    ++until.tv_sec;
  }
  return pthread_mutex_timedlock(lock, &until) == 0;
}

/* BYE with the last sample, once. from_exit: from _exit (LockFromExit): when a lock cannot be
 * had there, no BYE, as before (the watcher reads such an end as a child's _exit). */
static void SayBye(int from_exit) {
  leakbound_heap_exclude_begin();
  int locked;
  if (from_exit) {
    locked = LockFromExit(&g_marker_lock);
    if (locked && LockFromExit(&g_channel_lock)) {
      pthread_mutex_unlock(&g_channel_lock); /* the send below takes it again */
    } else if (locked) {
      pthread_mutex_unlock(&g_marker_lock);
      locked = 0;
    }
  } else {
    locked = pthread_mutex_lock(&g_marker_lock) == 0;
  }
  /* Another thread's exit or _exit may have said it meanwhile. */
  if (locked && !atomic_load(&g_followed)) {
    pthread_mutex_unlock(&g_marker_lock);
    locked = 0;
  }
  if (!locked) {
    leakbound_heap_exclude_end();
    return;
  }
  leakbound_watch_record bye;
  memset(&bye, 0, sizeof bye);
  bye.kind = LEAKBOUND_WATCH_BYE;
  bye.seq = g_steps;
  Sample(&bye.counters);
  bye.values[0] = LeakboundSitesDropped();
  bye.values[1] = LeakboundMappedDropped();
  Send(&bye);
  atomic_store(&g_followed, 0);
  pthread_mutex_unlock(&g_marker_lock);
  leakbound_heap_exclude_end();
}

__attribute__((destructor)) static void StopWatch(void) {
  if (!Followed()) return;
  SayBye(0);
  leakbound_heap_exclude_begin();
  AwaitWatcher();
  leakbound_heap_exclude_end();
}
