/* Process trees for the watch tests (docs/watch.md, "Process trees"): `tree MODE STEPS [ARGS]`.
 * Every step is leakbound/watch/step.h's marker; "leaks" keeps 64 bytes a step.
 *   prefork-leak / prefork-clean  a pre-forking server: the parent (no markers) forks 3 workers
 *                                 that each serve STEPS requests; worker 2 leaks in -leak
 *   clock-leak / clock-clean      the parent marks no step (it is sampled at the job's clock)
 *                                 and serves requests while 3 workers mark STEPS paced steps;
 *                                 the parent keeps 64 bytes a request in -leak
 *   daemon-leak / daemon-clean    a double-forked daemon (fork, setsid, fork; the first two exit
 *                                 at once) that runs the steps; it leaks in -leak
 *   daemon-crash                  the daemon runs STEPS clean steps, then crashes (SIGSEGV)
 *   exec-self                     STEPS clean steps, then execs itself as exec-leak (STEPS steps
 *                                 that leak): the same pid, two program images
 *   outsider FILE DONE            clean steps; writes the watcher's socket path to FILE and
 *                                 keeps stepping until DONE exists (at most 20 s) */
#define _GNU_SOURCE 1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "leakbound/watch/step.h"

static void* volatile g_sink;

/* One request or step: a working set of random sizes, all freed; `leak`: 64 bytes kept. */
static void Serve(unsigned* seed, int leak) {
  void* blocks[8];
  for (int i = 0; i < 8; ++i) {
    blocks[i] = malloc(1 + (size_t)(rand_r(seed) % 2048));
    memset(blocks[i], i, 1);
  }
  for (int i = 0; i < 8; ++i) free(blocks[i]);
  if (leak) g_sink = malloc(64);
  leakbound_watch_step();
}

static void Steps(int steps, int leak, unsigned seed) {
  for (int s = 0; s < steps; ++s) Serve(&seed, leak);
}

static void Pause(long ns) {
  struct timespec t = {0, ns};
  nanosleep(&t, NULL);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: tree prefork-leak|prefork-clean|clock-leak|clock-clean|daemon-leak|"
                    "daemon-clean|exec-self|outsider STEPS [FILE DONE]\n");
    return 2;
  }
  const char* mode = argv[1];
  const int steps = atoi(argv[2]);
  if (strncmp(mode, "prefork-", 8) == 0) {
    pid_t workers[3];
    for (int w = 0; w < 3; ++w) {
      workers[w] = fork();
      if (workers[w] == 0) {
        Steps(steps, strcmp(mode, "prefork-leak") == 0 && w == 2, 17u + (unsigned)w);
        _exit(0);
      }
    }
    int failed = 0;
    for (int w = 0; w < 3; ++w) {
      int status = 0;
      waitpid(workers[w], &status, 0);
      failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    return failed;
  }
  if (strncmp(mode, "clock-", 6) == 0) {
    pid_t workers[3];
    for (int w = 0; w < 3; ++w) {
      workers[w] = fork();
      if (workers[w] == 0) {
        unsigned seed = 31u + (unsigned)w;
        for (int s = 0; s < steps; ++s) {
          Serve(&seed, 0);
          Pause(300000);
        }
        _exit(0);
      }
    }
    /* The parent's requests, without a marker, until every worker is done. */
    const int leak = strcmp(mode, "clock-leak") == 0;
    unsigned seed = 7u;
    int running = 3, failed = 0;
    while (running > 0) {
      void* blocks[4];
      for (int i = 0; i < 4; ++i) blocks[i] = malloc(1 + (size_t)(rand_r(&seed) % 512));
      for (int i = 0; i < 4; ++i) free(blocks[i]);
      if (leak) g_sink = malloc(64);
      Pause(100000);
      int status = 0;
      for (pid_t done; (done = waitpid(-1, &status, WNOHANG)) > 0;) {
        --running;
        failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      }
    }
    return failed;
  }
  if (strncmp(mode, "daemon-", 7) == 0) {
    pid_t first = fork();
    if (first == 0) {
      setsid();
      if (fork() == 0) {
        Pause(100000000); /* the launcher and the middle process are gone by now */
        Steps(steps, strcmp(mode, "daemon-leak") == 0, 5u);
        if (strcmp(mode, "daemon-crash") == 0) {
          volatile int* nowhere = NULL;
          *nowhere = 1;
        }
        return 0;
      }
      _exit(0);
    }
    waitpid(first, NULL, 0);
    return 0;
  }
  if (strcmp(mode, "exec-self") == 0) {
    Steps(steps, 0, 3u);
    char* again[] = {argv[0], (char*)"exec-leak", argv[2], NULL};
    execv("/proc/self/exe", again);
    perror("execv");
    return 1;
  }
  if (strcmp(mode, "exec-leak") == 0) {
    Steps(steps, 1, 4u);
    return 0;
  }
  if (strcmp(mode, "outsider") == 0 && argc >= 5) {
    unsigned seed = 9;
    FILE* out = fopen(argv[3], "w");
    const char* socket_path = getenv("LEAKBOUND_WATCH_SOCKET");
    if (!out || !socket_path) return 3;
    fprintf(out, "%s\n", socket_path);
    fclose(out);
    for (int waited = 0; access(argv[4], F_OK) != 0 && waited < 2000; ++waited) {
      Serve(&seed, 0);
      Pause(10000000);
    }
    Steps(steps, 0, 10u);
    return 0;
  }
  fprintf(stderr, "tree: unknown mode %s\n", mode);
  return 2;
}
