/* The channel from a watched program to `leakbound watch`: messages (fixed-size records, and
 * batches) on a SOCK_SEQPACKET connection that each process of the job opens to the socket named
 * by LEAKBOUND_WATCH_SOCKET (docs/watch.md, "Process trees"): one connection per process image,
 * opened when the preload starts (after exec) and again in a forked child. The HELLO that opens
 * it hands the watcher a ring (leakbound_watch_ring, memory the two share, SCM_RIGHTS): every
 * later message is written there, not sent, and the watcher reads the ring every few
 * milliseconds (a send a step was most of a marker's cost: the kernel's socket buffers, ~1.2 us).
 * The connection stays, for the HELLO, for WAKE (the ring is filling: read it now), and for its
 * end, which tells the watcher the process is gone (the ring is read to its end first). A process
 * that cannot make a ring (no memfd, no address space) sends every message instead. A message is
 * written whole under one lock, so messages from several threads never interleave. Call-site
 * updates travel in batches (leakbound_watch_site_batch, up to LEAKBOUND_WATCH_SITE_BATCH sites a
 * message), and so do their names (leakbound_watch_name_batch). Shared by the preload and the
 * NVTX/CUDA injections (C, C++) and the parent (C++). */
#ifndef LEAKBOUND_WATCH_CHANNEL_H_
#define LEAKBOUND_WATCH_CHANNEL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LEAKBOUND_WATCH_MAGIC 0x3157424cu /* "LBW1" */
#define LEAKBOUND_WATCH_VERSION 10
#define LEAKBOUND_WATCH_TEXT 192  /* note text, call-site names */
#define LEAKBOUND_WATCH_VALUES 10 /* DEVICE / COUNTER values */
#define LEAKBOUND_WATCH_SITE_BATCH 168 /* sites in one SITES message (4,056 bytes) */

/* Environment the parent sets for the child. */
#define LEAKBOUND_WATCH_ENV_SOCKET "LEAKBOUND_WATCH_SOCKET" /* the watcher's listening socket */
/* A read-only page whose first uint64_t the watcher advances at every step (or timer sample) of
 * any process of the job: a process that marks no step of its own samples itself (a TICK with
 * site = 1) at its first allocation after each advance, i.e. at the steps of the job. */
#define LEAKBOUND_WATCH_ENV_CLOCK "LEAKBOUND_WATCH_CLOCK"
#define LEAKBOUND_WATCH_ENV_INTERVAL "LEAKBOUND_WATCH_INTERVAL_NS" /* timer sampling */
#define LEAKBOUND_WATCH_ENV_SITES "LEAKBOUND_WATCH_SITES"          /* "0": no call sites */
#define LEAKBOUND_WATCH_ENV_STEP_ON "LEAKBOUND_STEP_ON"            /* Python qualname */
#define LEAKBOUND_WATCH_ENV_STEP_RANGE "LEAKBOUND_STEP_RANGE"      /* NVTX range name */

typedef enum leakbound_watch_kind {
  /* A process image connected (counters: now; text: the heap's state; site: its origin,
   * LEAKBOUND_WATCH_ORIGIN_*; seq: its parent's pid; values[0]: a fork's ordinal among its
   * parent's forks, 1-based; values[1], values[2]: st_dev and st_ino of its executable). */
  LEAKBOUND_WATCH_HELLO = 1,
  /* STEP, TICK and BYE: values[0] is how many allocations so far were made at a call site the
   * site table had no room for (counted exactly, in no call site's books); values[1] how many
   * anonymous mappings or unmappings so far the mapping table did not book (host.mapped_bytes
   * is off by their bytes). */
  LEAKBOUND_WATCH_STEP = 2,  /* a step marker returned (counters after the step) */
  LEAKBOUND_WATCH_TICK = 3,  /* a timer sample (--interval; site 0) or a sample at the job's
                                clock (site 1: the process marks no step of its own) */
  LEAKBOUND_WATCH_SITES = 4, /* a leakbound_watch_site_batch: call sites whose survivors changed
                                (precedes its STEP/TICK) */
  LEAKBOUND_WATCH_NAME = 5,  /* a call site's symbol, sent once, before its first SITES entry
                                (the preload sends NAMES batches; one NAME is still read) */
  LEAKBOUND_WATCH_NOTE = 6,  /* a message for the report (e.g. --step-on resolution) */
  LEAKBOUND_WATCH_BYE = 7,   /* the process is exiting normally (counters at exit) */
  /* Device and framework counters (the CUDA injection, the Python module), each
   * sent just before the STEP/TICK record they belong to, with that record's
   * seq. */
  LEAKBOUND_WATCH_DEVICE = 8,  /* values[]: the CUPTI ledger, leakbound_watch_device_value order */
  LEAKBOUND_WATCH_COUNTER = 9, /* text: an exact counter's name ("torch.allocated_bytes"),
                                  values[0]: its value */
  LEAKBOUND_WATCH_PROBE = 10,  /* text: "probe\tstate" ("cupti\tactive"); long states come in
                                  pieces, site = 1 on every piece but the last */
  /* A census of survivors by birth (docs/watch.md, "Census"): a leakbound_watch_site_batch whose
   * entries are cohorts (site: cohort index, bytes, allocations: blocks still live), only the
   * non-empty ones, in one or more messages with the seq of the STEP/TICK they precede. Cohort
   * 0 began at process start; cohort c + 1 began right after the sample of the c-th census. */
  LEAKBOUND_WATCH_CENSUS = 11,
  /* The followed process forked (sent in the parent right after; counters.forks: forks so far,
   * the rest zero): a launcher that marks no step and ends with _exit is still known to have
   * run a child. */
  LEAKBOUND_WATCH_FORK = 12,
  /* What the process is in the job, for the report (text: "DataLoader worker 1", "rank 0"). */
  LEAKBOUND_WATCH_ROLE = 13,
  /* One caller of a call site (site: its id; seq: 1 for the site's caller, 2 for that one's,
   * ...; text: "PATH+0xOFFSET" as NAME's; values[0]: 1 when it was found by a stack scan past
   * code of no module, not by the unwinder; values[1]: 0, or the count of a stack that replaces
   * the one sent before), sent once for a site whose survivors grew at
   * LEAKBOUND_WATCH_FRAMES_AFTER markers: the callers of its next allocation after that; sent
   * again, with values[1] set, when more of its surviving samples came from another stack. */
  LEAKBOUND_WATCH_FRAME = 14,
  /* The Python line a call site's surviving blocks were allocated under (site: its id; text:
   * "FILE:LINE in FUNCTION"; values[0]: live samples from that line, values[1]: live samples,
   * values[2]: samples taken), sent once, after FRAME, for a site whose samples (the
   * LEAKBOUND_WATCH_SAMPLES allocations after its callers were taken, made while the leakbound
   * module traced the program's lines) had two markers to die. */
  LEAKBOUND_WATCH_PYTHON = 15,
  /* A leakbound_watch_name_batch: the NAME text of several call sites, each sent once, before
   * the SITES message that holds its first entry (a PyTorch import names ~15,000 sites: one
   * message each cost a send and a descriptor check apiece, ~40 ms of start-up). */
  LEAKBOUND_WATCH_NAMES = 16,
  /* The census of one or more call sites, right after the process's CENSUS (same seq): a
   * leakbound_watch_site_batch whose entries are (site: call-site id, reserved: cohort index,
   * bytes, allocations: that site's blocks born in that cohort and still live). A site has a
   * census once its survivors grew at LEAKBOUND_WATCH_FRAMES_AFTER markers (the sites whose
   * callers are taken, up to LEAKBOUND_WATCH_SITE_CENSUSES of them), counted from the cohort
   * after that; each of its censuses starts with an entry whose reserved is
   * LEAKBOUND_WATCH_SITE_CENSUS_FROM and whose bytes is that first cohort, then its non-empty
   * cohorts. */
  LEAKBOUND_WATCH_SITE_CENSUS = 17,
  /* Several messages in one (leakbound_watch_bundle): what a marker sends (its SITES, CENSUS,
   * FRAME, DEVICE ... and its STEP or TICK) goes out in as few sends as fit, each after one check
   * of the descriptor, instead of a send and a check apiece (a step with call sites on was two
   * of each). */
  LEAKBOUND_WATCH_BUNDLE = 18,
  /* On the connection, never in the ring: the ring is half full or more, read it now (the same
   * 24-byte head as a bundle, count 0). */
  LEAKBOUND_WATCH_WAKE = 19
} leakbound_watch_kind;

#define LEAKBOUND_WATCH_SITE_CENSUS_FROM 0xffffffffu
/* A SITES entry's reserved: the site's allocations are anonymous mappings (mmap), not heap
 * blocks; its bytes are in host.mapped_bytes. */
#define LEAKBOUND_WATCH_SITE_MAPPING 1u
/* ... or device memory (cudaMalloc, seen by the CUDA injection); its bytes are in
 * cupti.device_bytes. */
#define LEAKBOUND_WATCH_SITE_DEVICE 2u
#define LEAKBOUND_WATCH_SITE_CENSUSES 64

/* Callers kept per call site, and after how many markers with growth they are sent. */
#define LEAKBOUND_WATCH_FRAMES 8
#define LEAKBOUND_WATCH_FRAMES_AFTER 3
/* Blocks sampled per such site, and after how many markers the samples are read at the latest. */
#define LEAKBOUND_WATCH_SAMPLES 16
#define LEAKBOUND_WATCH_SAMPLE_VISITS 8

/* HELLO's site: how the image began. */
#define LEAKBOUND_WATCH_ORIGIN_EXEC 1 /* the preload started (the first image, or after exec) */
#define LEAKBOUND_WATCH_ORIGIN_FORK 2 /* a forked child of a watched process */

typedef struct leakbound_watch_counters {
  uint64_t heap_bytes;        /* leakbound_heap_stats.live_bytes */
  uint64_t heap_allocations;  /* live_allocations */
  uint64_t heap_peak_bytes;   /* peak since the previous sample (reset at each
                                 sample) */
  uint64_t total_allocations; /* cumulative */
  uint64_t untracked_allocations;
  uint64_t mapped_bytes; /* anonymous mmap'd bytes still mapped */
  uint64_t forks;        /* fork()s this process image made */
} leakbound_watch_counters;

/* DEVICE values, in CuptiProbe's counter order (cupti/include/leakbound/cupti/counters.h). */
typedef enum leakbound_watch_device_value {
  LEAKBOUND_DEVICE_BYTES = 0,
  LEAKBOUND_DEVICE_POOL_BYTES,
  LEAKBOUND_DEVICE_POOL_RESERVED_BYTES,
  LEAKBOUND_DEVICE_STATIC_BYTES,
  LEAKBOUND_DEVICE_MANAGED_BYTES,
  LEAKBOUND_DEVICE_PINNED_BYTES,
  LEAKBOUND_DEVICE_LIVE_ALLOCATIONS,
  LEAKBOUND_DEVICE_UNMATCHED_RELEASES,
  LEAKBOUND_DEVICE_DROPPED_RECORDS,
  LEAKBOUND_DEVICE_VALUE_COUNT
} leakbound_watch_device_value;

/* What the preload exports for the other injected pieces (resolved with dlsym):
 * a sampler called at every step marker, before the STEP record is sent, that
 * fills at most `capacity` values and returns how many (0: nothing to send). It
 * runs on the marking thread with the marker's lock held and its allocations
 * excluded from the host counters. */
typedef unsigned (*leakbound_watch_sampler)(uint64_t *values, unsigned capacity);
typedef void (*leakbound_watch_set_device_sampler_fn)(leakbound_watch_sampler sampler);
/* leakbound_watch_claim_device(): 1 for the first CUDA injection in the
 * followed process, 2 when one already claimed it (a second copy of the
 * library), 0 outside the followed process. */
typedef int (*leakbound_watch_claim_device_fn)(void);
typedef void (*leakbound_watch_probe_state_fn)(const char *probe, const char *state);
typedef void (*leakbound_watch_note_counter_fn)(const char *name, unsigned long long value);
/* leakbound_watch_device_alloc(address, bytes) / _free(address): called by the CUDA injection
 * on the allocating thread, after a cudaMalloc and before a cudaFree: the preload books the
 * block at the call site of the program's code that called CUDA (its stack is taken there). */
typedef void (*leakbound_watch_device_alloc_fn)(uint64_t address, uint64_t bytes);
typedef void (*leakbound_watch_device_free_fn)(uint64_t address);

typedef struct leakbound_watch_record {
  uint32_t magic;
  uint16_t version;
  uint16_t kind;    /* leakbound_watch_kind */
  uint32_t pid;     /* sender */
  uint32_t site;    /* NAME: call-site id (1-based) */
  uint64_t seq;     /* STEP: step index; TICK: tick index */
  uint64_t time_ns; /* CLOCK_MONOTONIC */
  leakbound_watch_counters counters;
  uint64_t site_bytes;                     /* reserved (version 2: SITE) */
  uint64_t site_allocations;               /* reserved */
  uint64_t site_pc;                        /* NAME: return address of the allocation call */
  char text[LEAKBOUND_WATCH_TEXT];         /* NOTE / NAME / HELLO (heap state),
                                              NUL-terminated */
  uint64_t values[LEAKBOUND_WATCH_VALUES]; /* DEVICE / COUNTER */
} leakbound_watch_record;

/* One call site's survivors after the step (bytes and number still live). */
typedef struct leakbound_watch_site_entry {
  uint32_t site; /* call-site id (1-based) */
  uint32_t reserved; /* SITES: 0, LEAKBOUND_WATCH_SITE_MAPPING or _DEVICE; the censuses: see their kinds */
  uint64_t bytes;
  uint64_t allocations;
} leakbound_watch_site_entry;

/* Census points: a census is taken after every sample whose count (seq + 1) is a multiple of
 * the census unit; the unit starts at 1 and doubles once the count reaches
 * LEAKBOUND_WATCH_CENSUS_POINTS x unit. So a run of S samples has censuses every S/16 to S/8
 * samples (and at the first 16), about 16 + 8 log2(S / 16) in all, at most 254 cohorts. */
#define LEAKBOUND_WATCH_CENSUS_POINTS 16

/* A SITES message: the same 24-byte head as a record (magic .. seq, with `count` where a record
 * has `site`), then `count` entries; only the used entries are sent, so the message is
 * offsetof(entries) + count * sizeof(entry) bytes. seq: the step (or tick) it precedes. */
typedef struct leakbound_watch_site_batch {
  uint32_t magic;
  uint16_t version;
  uint16_t kind; /* LEAKBOUND_WATCH_SITES */
  uint32_t pid;
  uint32_t count;
  uint64_t seq;
  leakbound_watch_site_entry entries[LEAKBOUND_WATCH_SITE_BATCH];
} leakbound_watch_site_batch;

/* A NAMES message: the same 24-byte head (`count` names), then `count` packed names, each a
 * uint32_t site id, a uint16_t length (< LEAKBOUND_WATCH_TEXT) and that many bytes of text (no
 * NUL); the message ends with the last name. */
#define LEAKBOUND_WATCH_NAME_BYTES (4096 - 24)
typedef struct leakbound_watch_name_batch {
  uint32_t magic;
  uint16_t version;
  uint16_t kind; /* LEAKBOUND_WATCH_NAMES */
  uint32_t pid;
  uint32_t count;
  uint64_t seq;
  unsigned char bytes[LEAKBOUND_WATCH_NAME_BYTES];
} leakbound_watch_name_batch;

/* A BUNDLE message: the same 24-byte head (`count` parts, seq 0), then `count` parts, each a
 * uint32_t size, a uint32_t 0 and that many bytes of one message of another kind (never a
 * BUNDLE), padded with zeros to a multiple of 8; the message ends with the last part. A bundle
 * that does not add up is dropped whole. At most LEAKBOUND_WATCH_BUNDLE_BYTES in all, as every
 * other message. */
#define LEAKBOUND_WATCH_BUNDLE_BYTES 4096
typedef struct leakbound_watch_bundle {
  uint32_t magic;
  uint16_t version;
  uint16_t kind; /* LEAKBOUND_WATCH_BUNDLE */
  uint32_t pid;
  uint32_t count;
  uint64_t seq;
} leakbound_watch_bundle;
typedef struct leakbound_watch_part {
  uint32_t size;
  uint32_t reserved;
} leakbound_watch_part;

/* The ring: a memfd of LEAKBOUND_WATCH_RING_DATA + LEAKBOUND_WATCH_RING_BYTES bytes, sealed
 * against shrinking and growing, handed over with the HELLO (SCM_RIGHTS) and mapped by both. Its
 * first page is this head; the data follows. The program writes each message as a
 * leakbound_watch_part (its size, 0) and the message, padded with zeros to a multiple of 8, at
 * `head` modulo the data's size, then moves `head` (release); a message that would run past the
 * data's end is preceded by a part of size LEAKBOUND_WATCH_RING_SKIP that fills the rest, and
 * starts at the beginning. The watcher reads from `tail` to `head` (acquire) and moves `tail`
 * (release); the program writes only while head - tail leaves room, else it sends WAKE and waits
 * (and stops reporting if the watcher never set `read_by`: a watcher that could not map it).
 * head and tail count bytes since the start and never wrap (2^64). Both sides use __atomic
 * builtins on them (C and C++ alike). */
#define LEAKBOUND_WATCH_RING_BYTES (128u << 10) /* the data: a power of two */
#define LEAKBOUND_WATCH_RING_DATA 4096u         /* where the data starts */
#define LEAKBOUND_WATCH_RING_SKIP 0xffffffffu
typedef struct leakbound_watch_ring {
  uint32_t magic;   /* LEAKBOUND_WATCH_MAGIC */
  uint16_t version; /* LEAKBOUND_WATCH_VERSION */
  uint16_t reserved;
  uint32_t bytes;   /* LEAKBOUND_WATCH_RING_BYTES */
  uint32_t read_by; /* 0 until the watcher has mapped it, then 1 (the watcher's store) */
  uint64_t pad0[6];
  uint64_t head; /* the program's, on a cache line of its own */
  uint64_t pad1[7];
  uint64_t tail; /* the watcher's */
  uint64_t pad2[7];
} leakbound_watch_ring;

#ifdef __cplusplus
}
static_assert(sizeof(leakbound_watch_ring) == 192 && sizeof(leakbound_watch_ring) <= LEAKBOUND_WATCH_RING_DATA,
              "the ring's head fits its first page");
static_assert(sizeof(leakbound_watch_bundle) == 24 && sizeof(leakbound_watch_part) == 8,
              "a bundle's head is a record's");
static_assert(sizeof(leakbound_watch_site_batch) <= 4096, "a batch must fit one page");
static_assert(sizeof(leakbound_watch_name_batch) == 4096, "a batch must fit one page");
static_assert(sizeof(leakbound_watch_record) <= 512, "a record must stay far below PIPE_BUF");
#endif

#endif /* LEAKBOUND_WATCH_CHANNEL_H_ */
