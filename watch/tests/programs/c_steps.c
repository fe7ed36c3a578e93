/* A C program watched by the watch tests: `c_steps MODE STEPS`. Marks a step with
 * leakbound/watch/step.h after each iteration. Modes: leak (24 bytes kept per step), clean
 * (random sizes, all freed), idle (steps with no allocation), crash (SIGSEGV after STEPS steps),
 * crash-leak (leak, then SIGSEGV), hang (waits for a signal after
 * STEPS steps), fork (a child allocates and steps too: it must not be followed), nomark (no
 * markers), timer-leak / timer-clean (no markers, 2 ms per step: for --interval), recur (1 KiB
 * kept at steps 149 and 299 only), masked (1 KiB kept every step, a 1 MiB start-up cache dropped
 * at step 170), plateau (64 bytes kept per step until 70% of STEPS, then none: a cache that
 * filled late in the run), working-set (one buffer of random size 1..100 KB held across each step),
 * regrow-leak (one buffer replaced every step, 64 bytes larger each time, beside the leak),
 * shared-site (one libc call site, strdup's malloc, reached from two lines: the first frees its
 * copy at once, the second keeps 24 bytes a step), empty-message (clean, and an empty message
 * written on watch's descriptor first) | bad-names
 * (clean, and three NAMES batches that do not add up written there first) | bad-site-census
 * (clean, and a SITE_CENSUS batch with three entries that do not fit written there first). */
#include <time.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "leakbound/watch/channel.h"
#include "leakbound/watch/step.h"

static void* volatile g_sink;

/* The preload's connection to the watcher: the socket connected to its folder. */
static int WatchChannel(void) {
  for (int fd = 3; fd < 4096; ++fd) {
    struct sockaddr_un peer;
    socklen_t size = sizeof peer;
    memset(&peer, 0, sizeof peer);
    if (getpeername(fd, (struct sockaddr*)&peer, &size) == 0 && peer.sun_family == AF_UNIX &&
        strstr(peer.sun_path, "leakbound-watch-") != NULL) {
      return fd;
    }
  }
  return -1;
}

/* BUNDLE messages (channel.h): one that adds up, carrying a NOTE, then three that do not (a part
 * past the end, a bundle inside a bundle, fewer parts than its count), each dropped whole. */
static void SendBundles(int channel) {
  static unsigned char bytes[LEAKBOUND_WATCH_BUNDLE_BYTES];
  leakbound_watch_record note;
  memset(&note, 0, sizeof note);
  note.magic = LEAKBOUND_WATCH_MAGIC;
  note.version = LEAKBOUND_WATCH_VERSION;
  note.kind = LEAKBOUND_WATCH_NOTE;
  note.pid = (uint32_t)getpid();
  strcpy(note.text, "a note that came in a bundle");
  for (int k = 0; k < 4; ++k) {
    memset(bytes, 0, sizeof bytes);
    leakbound_watch_bundle head = {LEAKBOUND_WATCH_MAGIC, LEAKBOUND_WATCH_VERSION,
                                   LEAKBOUND_WATCH_BUNDLE, (uint32_t)getpid(), 2, 0};
    size_t at = sizeof head;
    for (int part_index = 0; part_index < 2; ++part_index) {
      leakbound_watch_part part = {(uint32_t)sizeof note, 0};
      if (k == 1 && part_index == 1) part.size = 4000; /* past the end */
      memcpy(bytes + at, &part, sizeof part);
      if (k == 2 && part_index == 1) { /* a bundle inside */
        part.size = (uint32_t)sizeof head;
        memcpy(bytes + at, &part, sizeof part);
        memcpy(bytes + at + sizeof part, &head, sizeof head);
        at += sizeof part + sizeof head;
        continue;
      }
      memcpy(bytes + at + sizeof part, &note, sizeof note);
      at += sizeof part + sizeof note;
    }
    if (k == 3) head.count = 3;
    memcpy(bytes, &head, sizeof head);
    send(channel, bytes, at, MSG_NOSIGNAL);
  }
}

/* The ring this process writes its messages into (channel.h), found in /proc/self/maps; NULL
 * when it has none. */
static leakbound_watch_ring* OwnRing(void) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return NULL;
  char line[512];
  void* found = NULL;
  while (!found && fgets(line, sizeof line, maps)) {
    unsigned long start = 0;
    if (strstr(line, "/memfd:leakbound-channel") && sscanf(line, "%lx-", &start) == 1) {
      found = (void*)start;
    }
  }
  fclose(maps);
  return (leakbound_watch_ring*)found;
}

static void Work(unsigned* seed) {
  void* blocks[16];
  for (int i = 0; i < 16; ++i) {
    blocks[i] = malloc(1 + (size_t)(rand_r(seed) % 4096));
    memset(blocks[i], i, 1);
  }
  for (int i = 0; i < 16; ++i) free(blocks[i]);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: c_steps leak|clean|idle|crash|crash-leak|hang|fork|nomark|timer-leak|timer-clean STEPS\n");
    return 2;
  }
  const char* mode = argv[1];
  const int steps = atoi(argv[2]);
  unsigned seed = 7;
  void** kept = calloc((size_t)steps + 1, sizeof(void*));
  void* cache = strcmp(mode, "masked") == 0 ? malloc(1 << 20) : NULL;
  void* held = NULL;
  const int writes_on_channel = strcmp(mode, "empty-message") == 0 ||
                                strcmp(mode, "bad-names") == 0 ||
                                strcmp(mode, "bad-site-census") == 0 ||
                                strcmp(mode, "bad-bundle") == 0;

  const int channel = writes_on_channel ? WatchChannel() : -1;
  if (writes_on_channel && channel < 0) {
    fprintf(stderr, "c_steps: no connection to leakbound watch found\n");
    return 3;
  }
  if (strcmp(mode, "empty-message") == 0) send(channel, "", 0, MSG_NOSIGNAL);
  if (strcmp(mode, "bad-names") == 0) {
    static leakbound_watch_name_batch batch;
    batch.magic = LEAKBOUND_WATCH_MAGIC;
    batch.version = LEAKBOUND_WATCH_VERSION;
    batch.kind = LEAKBOUND_WATCH_NAMES;
    const uint32_t site = 7;
    const uint16_t lengths[3] = {4000, LEAKBOUND_WATCH_TEXT, 3}; /* past the end; too long; ok */
    for (int k = 0; k < 3; ++k) {
      memcpy(batch.bytes, &site, sizeof site);
      memcpy(batch.bytes + sizeof site, &lengths[k], sizeof lengths[k]);
      memset(batch.bytes + 6, 'x', 300);
      batch.count = k == 2 ? 2 : 1; /* the third says 2 names and holds one */
      const size_t size = offsetof(leakbound_watch_name_batch, bytes) + 6 + (k == 1 ? 300 : 3);
      send(channel, &batch, size, MSG_NOSIGNAL);
    }
  }
  if (strcmp(mode, "bad-site-census") == 0) {
    static leakbound_watch_site_batch batch;
    batch.magic = LEAKBOUND_WATCH_MAGIC;
    batch.version = LEAKBOUND_WATCH_VERSION;
    batch.kind = LEAKBOUND_WATCH_SITE_CENSUS;
    batch.pid = (uint32_t)getpid();
    const uint32_t site = 0x7ffffff0u; /* no call site has this id */
    const leakbound_watch_site_entry entries[4] = {
        {site, 5, 64, 1},                               /* a cohort before its FROM entry */
        {site, LEAKBOUND_WATCH_SITE_CENSUS_FROM, 3, 0}, /* its census starts at cohort 3 */
        {site, 1, 64, 1},                               /* a cohort before that start */
        {site, 1000, 64, 1}};                           /* past the last cohort (255) */
    memcpy(batch.entries, entries, sizeof entries);
    batch.count = 4;
    send(channel, &batch, offsetof(leakbound_watch_site_batch, entries) + sizeof entries,
         MSG_NOSIGNAL);
  }
  if (strcmp(mode, "bad-bundle") == 0) SendBundles(channel);
  leakbound_watch_ring* ring = strcmp(mode, "bad-ring") == 0 ? OwnRing() : NULL;
  if (strcmp(mode, "bad-ring") == 0 && !ring) {
    fprintf(stderr, "c_steps: no ring found in /proc/self/maps\n");
    return 3;
  }
  for (int step = 0; step < steps; ++step) {
    if (strcmp(mode, "idle") != 0) Work(&seed);
    if (strcmp(mode, "recur") == 0 && (step == 149 || step == 299)) kept[step] = malloc(1024);
    if (strcmp(mode, "masked") == 0) {
      kept[step] = malloc(1024);
      if (step == 170) {
        free(cache);
        cache = NULL;
      }
    }
    if (strcmp(mode, "plateau") == 0 && step < steps * 7 / 10) kept[step] = malloc(64);
    if (strcmp(mode, "working-set") == 0) {
      free(held);
      held = malloc(1 + (size_t)(rand_r(&seed) % 100000));
      memset(held, 1, 1);
    }
    if (strcmp(mode, "regrow-leak") == 0) {
      void* grown = malloc(64 * (size_t)(step + 1)); /* replaced every step, 64 B larger */
      memset(grown, 1, 1);
      free(held);
      held = grown;
      kept[step] = malloc(3 * 8); /* the leak beside it */
    }
    if (strcmp(mode, "leak") == 0 || strcmp(mode, "timer-leak") == 0 ||
        strcmp(mode, "crash-leak") == 0) {
      kept[step] = malloc(24);
    }
    if (strcmp(mode, "shared-site") == 0) {
      g_sink = strdup("twenty-three characters"); /* freed at once */
      free(g_sink);
      kept[step] = strdup("twenty-three characters"); /* the leak: 24 B a step */
    }
    if (strncmp(mode, "timer-", 6) == 0) {
      struct timespec pause_time = {0, 2000000};
      nanosleep(&pause_time, NULL);
      continue;
    }
    if (strcmp(mode, "fork") == 0 && step == steps / 2) {
      pid_t child = fork();
      if (child == 0) {
        /* 2 ms a step: a child that ends before watch checks its connection (its pid already
         * reaped from /proc) is summarised, never judged, and 50 bare steps took 0.2 ms. */
        const struct timespec pause = {0, 2000000};
        for (int i = 0; i < 50; ++i) {
          g_sink = malloc(1000); /* leaks in the child only */
          leakbound_watch_step();
          nanosleep(&pause, NULL);
        }
        _exit(0);
      }
      waitpid(child, NULL, 0);
    }
    const uint64_t before = ring ? __atomic_load_n(&ring->head, __ATOMIC_ACQUIRE) : 0;
    if (strcmp(mode, "nomark") != 0) leakbound_watch_step();
    if (ring && step == 148) { /* the first 149 steps read */
      const struct timespec settle = {0, 50 * 1000 * 1000};
      nanosleep(&settle, NULL);
    }
    if (ring && step >= 149 && step < 159) { /* each of the next steps' records: a size past the end */
      unsigned char* part = (unsigned char*)ring + LEAKBOUND_WATCH_RING_DATA + (before & (ring->bytes - 1));
      const uint32_t huge = 0x7fffff00u;
      memcpy(part, &huge, sizeof huge);
    }
  }
  if (strcmp(mode, "crash") == 0 || strcmp(mode, "crash-leak") == 0) {
    volatile int* nowhere = NULL;
    *nowhere = 1;
  }
  if (strcmp(mode, "hang") == 0) {
    for (;;) pause();
  }
  for (int step = 0; step < steps; ++step) free(kept[step]);
  free(kept);
  free(cache);
  free(held);
  return 0;
}
