// Programs that do to `leakbound watch` what real programs do (watch/tests/watch_test.sh, the
// hostile_* cases; docs/watch.md, "Limits"): `hostile MODE STEPS`. Each marks STEPS steps of
// clean work and exits 0 when it saw nothing of watch; 3 when it did (it says what).
//   own-new     replaces only operator new(size_t) / operator delete(void*) (a 16-byte header)
//               and uses new[], delete[] and sized deletes: they must reach its own
//   closefrom   closefrom(3), then opens descriptors past watch's channel number: none of its
//               own may receive a record, and the steps must still arrive
//   raw-close   closes every descriptor with a raw close_range system call (behind watch's
//               hooks) and dup2s its own socket onto the channel's number, also raw: it must
//               receive nothing (watch loses the steps and says why)
//   dup2-over   dup2s its own pipe onto the channel's number: its bytes stay its own
//   two-sigint  finishes its "epoch" on the first SIGINT and stops on the second (exit 0)
//   own-group   two-sigint in a process group of its own (setpgid): Ctrl-C to watch still reaches it
//               (run it below a shell: watch's child already leads its own group)
//   ignore-int  ignores SIGINT and runs its steps to the end (2 ms each)
//   read-tty    reads a line from its terminal (a prompt) before stepping
//   job-stop    says "ready", steps (2 ms each; time to stop it with Ctrl-Z, bg and fg it), then
//               reads a line from its terminal: it must have the terminal again after fg
//   leak-exit   keeps 24 bytes a step, then exits with status 3
//   bad-text    notes text that is not valid UTF-8 (its arguments may be too)
//   raw-fork    first forks a child with a raw fork system call (behind pthread_atfork, so the
//               preload's fork handlers do not run in it), which keeps 24 bytes a step and marks
//               STEPS steps of its own: none may reach the parent's series (its ring is shared
//               memory), which then marks its own STEPS clean steps
//   threads-probe  8 threads each report a 600-byte state of one probe 50 times at once (sent
//               in pieces): the state kept must be one whole, not mixed with another's
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "leakbound/watch/step.h"

namespace {

constexpr std::uint64_t kMagic = 0x6f776e6e6577ull;  // "ownnew"
std::uint64_t g_own_news = 0;

void Work(unsigned* seed) {
  std::vector<std::string> words;
  for (int i = 0; i < 16; ++i) words.emplace_back(1 + rand_r(seed) % 200, 'x');
  int* array = new int[1 + rand_r(seed) % 64];
  array[0] = 1;
  delete[] array;
}

// The preload's connection to the watcher: the socket connected to its folder (-1: none).
int ChannelNumber() {
  for (int fd = 3; fd < 4096; ++fd) {
    sockaddr_un peer{};
    socklen_t size = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) == 0 &&
        peer.sun_family == AF_UNIX && std::strstr(peer.sun_path, "leakbound-watch-") != nullptr) {
      return fd;
    }
  }
  return -1;
}

int Fail(const char* what) {
  std::fprintf(stderr, "hostile: %s\n", what);
  return 3;
}

// Bytes waiting on the program's own descriptors: any is a record watch sent it.
int Stray(const std::vector<int>& fds) {
  char buffer[4096];
  for (int fd : fds) {
    const ssize_t got = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (got > 0) {
      std::fprintf(stderr, "hostile: descriptor %d received %zd bytes it never expected%s\n", fd,
                   got, got >= 4 && std::memcmp(buffer, "LBW1", 4) == 0 ? " (magic LBW1)" : "");
      return 3;
    }
  }
  return 0;
}

// Asks on the terminal and reads the answer (stdin), says what it got.
bool Prompt(const char* question) {
  std::fputs(question, stdout);
  std::fflush(stdout);
  char line[64];
  if (!std::fgets(line, sizeof line, stdin)) return false;
  std::printf("got %s", line);
  return true;
}

volatile sig_atomic_t g_sigints = 0;
void OnSigint(int) { g_sigints = g_sigints + 1; }

}  // namespace

// The program's own allocator: a header in front of every block, checked on delete.
void* operator new(std::size_t size) {
  auto* block = static_cast<std::uint64_t*>(std::malloc(size + 16));
  if (!block) throw std::bad_alloc();
  block[0] = kMagic;
  ++g_own_news;
  return block + 2;
}
void operator delete(void* pointer) noexcept {
  if (!pointer) return;
  auto* block = static_cast<std::uint64_t*>(pointer) - 2;
  if (block[0] != kMagic) {
    std::fprintf(stderr, "hostile: operator delete got a block its operator new did not make\n");
    std::abort();
  }
  block[0] = 0;
  std::free(block);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: hostile MODE STEPS (modes: see hostile.cc)\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int steps = std::atoi(argv[2]);
  unsigned seed = 11;
  std::vector<int> own;  // descriptors to check for stray records
  std::vector<void*> kept;
  if (mode == "closefrom") {
    const int channel = ChannelNumber();
    if (channel < 0) return Fail("no connection to leakbound watch found");
    ::closefrom(3);
    for (int fd = 3; fd <= channel + 2;) {  // fill the numbers up to and past the channel's
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) != 0) return Fail("socketpair failed");
      own.push_back(pair[0]);
      own.push_back(pair[1]);
      fd = pair[1];
    }
  } else if (mode == "raw-close") {
    const int channel = ChannelNumber();
    if (channel < 0) return Fail("no connection to leakbound watch found");
    ::syscall(SYS_close_range, 3u, ~0u, 0);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) != 0) return Fail("socketpair failed");
    if (::syscall(SYS_dup2, pair[0], channel) != channel) return Fail("dup2 failed");
    own = {pair[1], channel};
  } else if (mode == "dup2-over") {
    const int channel = ChannelNumber();
    if (channel < 0) return Fail("no connection to leakbound watch found");
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0 || ::dup2(pipe_fds[1], channel) != channel) return Fail("dup2 failed");
    if (::write(channel, "mine", 4) != 4) return Fail("write to its own descriptor failed");
    char back[8] = {};
    if (::read(pipe_fds[0], back, sizeof back) != 4 || std::memcmp(back, "mine", 4) != 0) {
      return Fail("its own pipe did not give back what it wrote");
    }
  } else if (mode == "two-sigint" || mode == "own-group") {
    if (mode == "own-group" && ::setpgid(0, 0) != 0) return Fail("setpgid failed");
    struct sigaction action {};
    action.sa_handler = OnSigint;
    ::sigaction(SIGINT, &action, nullptr);
    std::printf("ready\n");  // the tests signal only after this
    std::fflush(stdout);
  } else if (mode == "ignore-int" || mode == "job-stop") {
    if (mode == "ignore-int") ::signal(SIGINT, SIG_IGN);
    std::printf("ready\n");
    std::fflush(stdout);
  } else if (mode == "read-tty") {
    if (!Prompt("continue? ")) return Fail("no answer on the terminal");
  } else if (mode == "bad-text") {
    auto note = reinterpret_cast<void (*)(const char*)>(dlsym(RTLD_DEFAULT, "leakbound_note"));
    if (note) {
      note("caf\xe9 (Latin-1, not UTF-8)");
      std::string cut(185, 'a');
      cut += "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";  // cut mid-character at 191 bytes
      note(cut.c_str());
    }
  } else if (mode == "raw-fork") {
#ifdef SYS_fork
    const long child = ::syscall(SYS_fork);
#else  // aarch64, riscv64: clone as fork does it, still behind pthread_atfork
    const long child = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
    if (child < 0) return Fail("fork failed");
    if (child == 0) {
      for (int step = 0; step < steps; ++step) {
        kept.push_back(std::malloc(24));
        LEAKBOUND_STEP();
      }
      ::usleep(100000);  // long enough for the watcher to read the ring, were anything in it
      ::_exit(0);
    }
    int status = 0;
    if (::waitpid(static_cast<pid_t>(child), &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      return Fail("the raw-forked child failed");
    }
  } else if (mode == "threads-probe") {
    auto state = reinterpret_cast<void (*)(const char*, const char*)>(
        dlsym(RTLD_DEFAULT, "leakbound_probe_state"));
    if (state) {
      std::vector<std::thread> threads;
      for (int t = 0; t < 8; ++t) {
        threads.emplace_back([state, t] {
          // One probe name for all: the watcher keeps its last state, which must be one whole.
          const std::string text = "unavailable: thread " + std::to_string(t) + " " +
                                   std::string(600, static_cast<char>('a' + t));
          for (int i = 0; i < 50; ++i) state("cupti", text.c_str());
        });
      }
      for (std::thread& thread : threads) thread.join();
    }
  } else if (mode != "own-new" && mode != "leak-exit") {
    std::fprintf(stderr, "hostile: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  for (int step = 0; step < steps; ++step) {
    Work(&seed);
    if (mode == "leak-exit") kept.push_back(std::malloc(24));
    if (mode == "ignore-int" || mode == "job-stop") ::usleep(2000);
    if (mode == "two-sigint" || mode == "own-group") {
      if (g_sigints >= 2) {
        std::printf("stopped at step %d of %d\n", step, steps);
        return 0;
      }
      ::usleep(g_sigints == 1 ? 20000 : 5000);  // the "epoch" goes on after the first
    }
    LEAKBOUND_STEP();
  }
  if (mode == "own-new" && g_own_news == 0) return Fail("its operator new was never called");
  if (int stray = Stray(own)) return stray;
  if (mode == "two-sigint" || mode == "own-group") {
    return Fail("ran to the end: the second SIGINT never arrived");
  }
  if (mode == "ignore-int") std::printf("ran all %d steps\n", steps);
  if (mode == "job-stop") {
    if (!Prompt("ran all steps; continue? ")) return Fail("no answer on the terminal");
  }
  return mode == "leak-exit" ? 3 : 0;
}
