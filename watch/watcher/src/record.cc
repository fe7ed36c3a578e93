// `leakbound watch`: starting the program under the preload and receiving the records of every
// process of the job (docs/watch.md, "Process trees"). Each process image connects on its own to
// a SOCK_SEQPACKET socket in a folder only this user can enter (mode 0700; one record per
// message, never interleaved; a vanished watcher is EPIPE in the program, not SIGPIPE); a
// connection is kept only from a process of the job: the same uid (SO_PEERCRED) and a pid whose
// ancestors lead to watch (a subreaper, so orphans of the job stay below it). Up to
// kMessagesPerRead messages are read per recvmmsg. Signals received here are forwarded to the
// program's process group and to every process of the job outside it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <iostream>
#include <stdexcept>

#include "internal.h"

namespace leakbound::watch {
namespace {

using namespace detail;  // NOLINT(google-build-using-namespace): the watcher's own pieces

int g_signal_pipe[2] = {-1, -1};

// Signals watch passes on to the program's process group, each time one arrives (a program may
// finish its epoch on the first SIGINT and stop on the second). SIGCHLD only wakes the loop.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
// Signals watch reads for itself: a child's end or stop, and its own continuing (a shell's fg of
// a job that bg had continued: the terminal goes on to the program).
constexpr int kWatched[] = {SIGCHLD, SIGCONT};

// One byte per signal into the pipe the loop polls: no signal is lost or merged.
void OnSignal(int signal_number) {
  const int saved = errno;
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] ssize_t ignored = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

// The controlling terminal, if any. The program runs in a process group of its own (so that
// watch can signal all of it); while watch holds the terminal's foreground, that group is made
// the foreground one, as a shell does for a job, so that the program can read the terminal (a
// prompt) and gets Ctrl-C, Ctrl-Z and Ctrl-\ itself; watch takes the terminal back when the
// program stops or ends. The foreground is checked at each handover, never assumed.
class Terminal {
 public:
  Terminal() : fd_(::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)) {}
  ~Terminal() {
    if (fd_ >= 0) ::close(fd_);
  }
  Terminal(const Terminal &) = delete;
  Terminal &operator=(const Terminal &) = delete;
  int fd() const { return fd_; }
  // Makes `to` the foreground group if `from` holds it now; true when it did. SIGTTOU is blocked
  // around the call, so that a process outside the foreground may set it (POSIX), and so is
  // SIGTSTP, so that watch is not stopped (and moved to the background) between the check and
  // the change. Async-signal-safe.
  static bool Hand(int fd, pid_t from, pid_t to) {
    if (fd < 0) return false;
    sigset_t blocked, saved;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTTOU);
    sigaddset(&blocked, SIGTSTP);
    ::sigprocmask(SIG_BLOCK, &blocked, &saved);
    const bool handed = ::tcgetpgrp(fd) == from && ::tcsetpgrp(fd, to) == 0;
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    return handed;
  }
  bool GiveTo(pid_t program_group) const { return Hand(fd_, ::getpgrp(), program_group); }
  void TakeBack(pid_t program_group) const { Hand(fd_, program_group, ::getpgrp()); }

 private:
  int fd_ = -1;
};

class SignalForwarding {
 public:
  SignalForwarding() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw std::runtime_error(std::string("watch: pipe2 failed: ") + std::strerror(errno));
    }
    struct sigaction action {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // SIGCHLD on a stop too: watch stops with its program
    // Every one is caught and forwarded, also one that watch's caller ignores (nohup,
    // `trap '' INT`, a non-interactive shell's background job): the program starts with it
    // ignored, as bare (ForProgram), and decides, as bare: one that installs a handler of its own
    // gets it (a server's clean shutdown), one that keeps it ignored runs on. Such a signal is
    // no interruption of watch's (Ignored). Until 2026-12-08 the program got the default, which
    // ended a `nohup`'d program on a hang-up.
    for (int s : kForwarded) ::sigaction(s, &action, &saved_[s]);
    for (int s : kWatched) ::sigaction(s, &action, &saved_[s]);
  }
  ~SignalForwarding() {
    for (int s : kForwarded) ::sigaction(s, &saved_[s], nullptr);
    for (int s : kWatched) ::sigaction(s, &saved_[s], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  // Whether watch's caller ignored signal s.
  bool Ignored(int s) const { return saved_[s].sa_handler == SIG_IGN; }
  // What the program starts with for a signal watch handles: ignored where watch's caller ignored
  // it (an ignored SIGCHLD too, which watch itself must catch), else the default, as an exec from
  // the caller would give it. Async-signal-safe (the forked child reads it).
  void ForProgram(int s) const {
    struct sigaction to {};
    to.sa_handler = saved_[s].sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL;
    ::sigaction(s, &to, nullptr);
  }

 private:
  struct sigaction saved_[NSIG] {};
};

// A process of the job seen on /proc but not (yet) connected.
struct Unseen {
  std::string command_line;
  std::string reason;
  int scans = 0;
};

// A connection of the job, open until its process image ends.
// How often a process's private memory is read at most (smaps_rollup walks its page tables):
// every 50 ms, and no sooner than kPrivateMemoryShare times the last read took, but at least
// every kPrivateMemoryLongest. A read of a PyTorch process (~250 MiB) takes ~7 ms: every 50 ms
// it was 14% of a core per process, taken from the program on a small machine (a DataLoader
// job ran 1.4x bare, the watcher's CPU mostly smaps_account). Uncapped, a loaded machine's slow
// reads spaced them so far that the PSS series became a staircase whose steps hid a steady
// copy-on-read rise (torch_tree_cow failed in CI).
constexpr auto kPrivateMemoryEvery = std::chrono::milliseconds(50);
constexpr auto kPrivateMemoryLongest = std::chrono::milliseconds(100);
constexpr int kPrivateMemoryShare = 50;
// A process that shares no anonymous memory with another of the job (started by exec, no fork
// seen: a single-process PyTorch run) cannot show the copy-on-read rise that PSS is read so often
// for: its smaps_rollup is read at most every kPrivateMemoryAlone, and its RSS from statm (no
// walk) every kPrivateMemoryEvery in between, its PSS the last one read. Every 100 ms, the walk
// of a PyTorch process (4.3 ms) was 4% of a core on a machine where the program wants both, and
// held the program's mmap lock, so its mmap and munmap waited for it.
constexpr auto kPrivateMemoryAlone = std::chrono::milliseconds(1000);

struct Connection {
  int fd = -1;
  size_t image = 0;  // index in WatchJob::images
  std::unique_ptr<detail::ChannelRing> ring = std::make_unique<detail::ChannelRing>();
  std::chrono::steady_clock::time_point private_read{};  // the last smaps_rollup read
  std::chrono::steady_clock::duration private_every = kPrivateMemoryEvery;
  std::chrono::steady_clock::time_point resident_read{};  // the last read of either
  std::uint64_t last_pss = 0;                             // what the last smaps_rollup said
  // RSS and PSS read when the process was first heard from with no sample yet (it had just
  // connected, so it was alive), for its first sample when the first samples arrive and no read
  // of them succeeds: a program of a few hundred microseconds can end before the first read at a
  // sample (tree_compiler's did once, on a loaded machine).
  bool first_read = false, first_ok = false, first_given = false;
  std::uint64_t first_rss = 0, first_pss = 0;
};

// How often watch looks on /proc for processes of the job that never connected.
constexpr auto kScanEvery = std::chrono::milliseconds(200);
constexpr auto kRestAfterRecords = std::chrono::milliseconds(1);  // see the receive loop
// The shortest rest, for a connection that brings records faster than the rest drains them.
constexpr auto kShortestRest = std::chrono::microseconds(50);
// Records the busiest connection should bring in one round: a third of what a program's socket
// buffer holds (~190 records of the default 208 KiB).
constexpr std::uint64_t kRecordsPerRest = 64;
// How often the rings are read while messages come (a 20,000-step loop writes ~40 KiB of its
// 128 KiB ring in 2 ms), and at the longest while none do.
constexpr std::chrono::microseconds kRingEvery{2000};
constexpr std::chrono::microseconds kRingQuiet{32000};

// The next rest, from the last one and the records the busiest connection brought after it: the
// rest that would have brought kRecordsPerRest at that rate, between kShortestRest and
// kRestAfterRecords. A round that found a full buffer (the program was waiting) brought fewer
// records than it would have taken, so the rest shrinks by a third or more again at the next round
// until the buffer no longer fills; quiet rounds let it grow back to the full rest. Before, every
// rest was 1 ms, and a program marking a step every few microseconds waited in its send for most
// of it (a C loop of bare `leakbound_watch_step()` calls: 7.3 us a step).
std::chrono::microseconds NextRest(std::chrono::microseconds last, std::uint64_t most) {
  const auto full = std::chrono::duration_cast<std::chrono::microseconds>(kRestAfterRecords);
  if (most == 0) return full;
  const auto next = last * static_cast<std::int64_t>(kRecordsPerRest) /
                    static_cast<std::int64_t>(most);
  return std::clamp<std::chrono::microseconds>(next, kShortestRest, full);
}


}  // namespace

const WatchRecording &WatchJob::Root() const {
  static const WatchRecording none;
  const WatchRecording *root = nullptr;
  for (const WatchImage &image : images) {
    if (image.root) root = &image.recording;
  }
  return root ? *root : none;
}

WatchJob RecordProgram(const WatchOptions &options, const WatchPaths &paths) {
  if (paths.preload.empty()) {
    throw WatchUsageError(
        "libleakbound_preload.so not found next to leakbound; build the "
        "leakbound_preload target or set LEAKBOUND_PRELOAD to its path");
  }
  if (!options.step_range.empty() && paths.nvtx_injection.empty()) {
    throw WatchUsageError(
        "--step-range needs libleakbound_nvtx_inject.so; build the "
        "leakbound_nvtx_inject target or set LEAKBOUND_NVTX_INJECTION");
  }
  if (!options.step_on.empty() &&
      (paths.python.empty() || !fs::exists(paths.python / "sitecustomize" / "sitecustomize.py") ||
       !fs::exists(paths.python / "leakbound" / "__init__.py"))) {
    throw WatchUsageError(
        "--step-on needs leakbound's Python folder (leakbound/, sitecustomize/), looked for at " +
        (paths.python.empty() ? std::string("<build>/watch/python and <prefix>/share/leakbound/python")
                              : paths.python.string()) +
        "; build the leakbound_watch_python target, install leakbound again, or set "
        "LEAKBOUND_WATCH_PYTHON to the folder");
  }
  const fs::path program = ResolveCommand(options.command.front());

  JobFolder folder;
  // Room for one connection per process of a large job (restored in the program: it runs with
  // the limit it has bare).
  rlimit files{};
  const bool have_files = ::getrlimit(RLIMIT_NOFILE, &files) == 0;
  if (have_files && files.rlim_cur < files.rlim_max) {
    rlimit raised = files;
    raised.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }
  // Orphans of the job (a double-forked daemon, a worker whose launcher exited) are reparented
  // to watch, so they stay in the job and their ends are seen.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  std::vector<std::string> env =
      ChildEnvironment(options, paths, folder.socket_path(), folder.clock_path());
  // A user's own PYTHONMALLOC (pymalloc_debug, say) is replaced: said, not done silently.
  if (const char *own = std::getenv("PYTHONMALLOC");
      !options.keep_pymalloc && own != nullptr && *own && std::string(own) != "malloc") {
    std::cerr << "leakbound watch: PYTHONMALLOC=" << own
              << " is replaced by malloc in the program (how watch counts every Python object); "
                 "--keep-pymalloc keeps pymalloc\n";
  }
  std::vector<char *> envp;
  for (std::string &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.command;
  std::vector<char *> argv;
  for (std::string &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int exec_error[2];
  if (::pipe2(exec_error, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("watch: pipe2 failed: ") + std::strerror(errno));
  }

  Terminal terminal;
  SignalForwarding forwarding;
  const pid_t watch_group = ::getpgrp();
  // Every signal blocked across fork: the child must not run watch's handlers before its exec.
  sigset_t all, unblocked;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &unblocked);
  const auto started = std::chrono::steady_clock::now();
  const pid_t watcher = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    ::pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
    throw std::runtime_error(std::string("watch: fork failed: ") + std::strerror(errno));
  }
  if (child == 0) {  // async-signal-safe only
    // Killed with watch: a watch that dies without forwarding a signal (SIGKILL, a CI job's hard
    // timeout) takes the program with it instead of leaving it running unwatched. Set by this
    // thread's parent, the one that forked (watch's main thread, alive until the job ends); kept
    // across the exec, not inherited by the program's own children. A watch already gone
    // before the setting took is seen by the parent's pid.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != watcher) ::_exit(137);
    if (have_files) ::setrlimit(RLIMIT_NOFILE, &files);
    ::setpgid(0, 0);
    Terminal::Hand(terminal.fd(), watch_group, ::getpid());
    for (int s : kForwarded) forwarding.ForProgram(s);
    for (int s : kWatched) forwarding.ForProgram(s);
    ::sigprocmask(SIG_SETMASK, &unblocked, nullptr);
    ::execve(program.c_str(), argv.data(), envp.data());
    const int error = errno;
    [[maybe_unused]] ssize_t ignored = ::write(exec_error[1], &error, sizeof error);
    ::_exit(127);
  }
  ::setpgid(child, child);  // both sides, so the group exists before any signal is forwarded
  terminal.GiveTo(child);
  ::pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
  ::close(exec_error[1]);
  int error = 0;
  const bool exec_failed = ::read(exec_error[0], &error, sizeof error) == sizeof error;
  ::close(exec_error[0]);

  WatchJob job;
  job.root_pid = static_cast<std::uint64_t>(child);
  std::vector<Connection> connections;
  std::uint64_t unverified = 0;
  std::map<std::uint64_t, int> reaped;  // pid -> wait status, of orphans watch reaped
  bool root_done = false;
  bool out_of_descriptors = false;  // accept failed for want of descriptors: it waits in the queue
  bool stop_waiting = false;        // a signal after the root ended: leave the rest running
  int root_status = 0;
  std::uint64_t forwarded_mask = 0;
  int forwarded_first = 0;

  std::map<std::uint64_t, Unseen> unseen;
  auto last_scan = std::chrono::steady_clock::now();
  // A process of the job that has no connection, or whose program changed (exec) and the new
  // image did not connect; seen in two scans in a row (not a fork on its way to connecting).
  const auto scan = [&] {
    for (const auto &[pid, parent] : JobProcesses()) {
      (void)parent;
      const WatchImage *latest = nullptr;
      for (const WatchImage &i : job.images) {
        if (i.pid == pid) latest = &i;
      }
      const std::string command_line = CommandLineOf(pid);
      struct stat exe {};
      const bool have_exe =
          ::stat(("/proc/" + std::to_string(pid) + "/exe").c_str(), &exe) == 0;
      // The same program as its latest image (before that image's HELLO is read: not yet known).
      if (latest && (!latest->recording.hello || !have_exe ||
                     (latest->recording.exe_dev == static_cast<std::uint64_t>(exe.st_dev) &&
                      latest->recording.exe_ino == static_cast<std::uint64_t>(exe.st_ino)))) {
        unseen.erase(pid);
        continue;
      }
      Unseen &u = unseen[pid];
      if (u.command_line != command_line) {
        u = Unseen{};
        u.command_line = command_line;
      }
      if (++u.scans == 2) u.reason = WhyNotObserved(pid, paths.preload.string());
    }
  };
  const auto accept_all = [&] {
    for (;;) {
      const int fd = ::accept4(folder.listen_fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE) out_of_descriptors = true;
        return;
      }
      ucred peer{};
      socklen_t size = sizeof peer;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || peer.pid <= 0) {
        job.refused.push_back("a connection whose sender could not be identified (SO_PEERCRED; "
                              "a process in another pid namespace?)");
        ::close(fd);
        continue;
      }
      const auto pid = static_cast<std::uint64_t>(peer.pid);
      bool verified = true;
      if (peer.uid != ::getuid() || !InJob(pid)) {
        if (peer.uid == ::getuid() && ParentOf(pid) == 0) {
          // Gone before it could be checked (it sent and ended at once): kept for what it says
          // of the tree (a daemon's middle process), never judged.
          verified = false;
          ++unverified;
        } else {
          job.refused.push_back("pid " + std::to_string(pid) + " (uid " +
                                std::to_string(peer.uid) + ", `" + CommandLineOf(pid) +
                                "`): not a process of the job; nothing it sent was used");
        }
        if (verified) {
          ::close(fd);
          continue;
        }
      }
      WatchImage image;
      image.pid = pid;
      image.parent_pid = ParentOf(pid);
      image.verified = verified;
      image.root = pid == job.root_pid;
      image.command_line = CommandLineOf(pid);
      image.comm = ReadProcFile(pid, "comm");
      while (!image.comm.empty() && image.comm.back() == '\n') image.comm.pop_back();
      image.rank = RankOf(pid);
      job.images.push_back(std::move(image));
      connections.push_back({fd, job.images.size() - 1});
    }
  };
  // While the program runs and watch holds the terminal's foreground, it goes to the program's
  // group, which is continued (a process of it that read the terminal in the background stopped
  // there, and only the first process's stops reach watch). True when it was handed on.
  const auto hand_on = [&] {
    if (root_done || !terminal.GiveTo(child)) return false;
    ::kill(-child, SIGCONT);
    return true;
  };
  // A signal watch's caller ignored is passed on for the program to decide, and is no
  // interruption (`nohup leakbound watch` is neither stopped nor marked by a hang-up).
  const auto forward = [&](int s) {
    if (!forwarding.Ignored(s)) {
      if (forwarded_first == 0) forwarded_first = s;
      forwarded_mask |= 1ull << s;
      if (root_done) stop_waiting = true;
    }
    ::kill(-child, s);
    for (const Connection &c : connections) {  // processes of the job outside its group
      const auto pid = static_cast<pid_t>(job.images[c.image].pid);
      if (pid != child && ::getpgid(pid) != child) ::kill(pid, s);
    }
  };

  // Records that arrived in the last round: rest kRestAfterRecords without waiting on the
  // connections, then read all of them. A send to a connection nobody waits on wakes no one; one
  // wake-up per record (a program stepping every 20 us) cost the program ~5 us per step in
  // scheduler work on this machine (perf: the sender in try_to_wake_up). Signals, new
  // connections and hang-ups still end the rest at once. The rest follows the busiest
  // connection's rate (NextRest), so that a program's socket buffer (~190 records) does not fill
  // during one: a program that fills it waits in its send for the end of the rest.
  bool rest = false;
  std::uint64_t most = 0;  // records the busiest connection brought in the last round
  auto rest_for = std::chrono::duration_cast<std::chrono::microseconds>(kRestAfterRecords);
  std::chrono::microseconds ring_wait = kRingEvery;
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    fds.push_back({folder.listen_fd(), static_cast<short>(out_of_descriptors ? 0 : POLLIN), 0});
    for (const Connection &c : connections) {
      fds.push_back({c.fd, static_cast<short>(rest ? 0 : POLLIN), 0});
    }
    // Without SIGCHLD for orphans that end while nothing is sent, look again now and then: at
    // the next scan of /proc at the latest (so that scans keep their pace when records arrive).
    const auto until_scan = std::chrono::duration_cast<std::chrono::milliseconds>(
        kScanEvery - (std::chrono::steady_clock::now() - last_scan));
    if (rest) rest_for = NextRest(rest_for, most);
    auto wait = rest ? rest_for
                     : std::chrono::microseconds(std::chrono::milliseconds(
                           std::clamp<std::int64_t>(until_scan.count(), 1, 200)));
    // Rings are read on a timer (a program that fills half of one says so on its connection):
    // every kRingEvery while they bring messages, less often while they are quiet.
    if (std::any_of(connections.begin(), connections.end(),
                    [](const Connection &c) { return c.ring->attached(); })) {
      wait = std::min(wait, ring_wait);
    }
    const timespec wait_for{static_cast<time_t>(wait.count() / 1000000),
                            static_cast<long>(wait.count() % 1000000) * 1000};
    const int ready = ::ppoll(fds.data(), fds.size(), &wait_for, nullptr);
    if (ready < 0 && errno != EINTR) break;
    const bool read_all = rest;
    rest = false;
    most = 0;
    bool ring_brought = false;
    if (fds[1].revents & POLLIN) accept_all();
    if (const auto now = std::chrono::steady_clock::now(); now - last_scan >= kScanEvery) {
      scan();
      last_scan = now;
      // A shell's fg of a job that bg had continued gives the terminal to watch's group and
      // (bash) sends no SIGCONT: the program gets it on within a scan.
      hand_on();
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      Connection &c = connections[i - 2];
      if (!read_all && !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !c.ring->Pending()) {
        continue;
      }
      WatchRecording &recording = job.images[c.image].recording;
      const std::uint64_t before = recording.clock_moves;
      const std::uint64_t messages_before = recording.messages;
      const std::uint64_t ring_before = c.ring->messages();
      const bool open = Drain(c.fd, *c.ring, recording, false);
      const std::uint64_t from_ring = c.ring->messages() - ring_before;
      ring_brought = ring_brought || from_ring > 0;
      if (recording.messages - messages_before > from_ring) {  // the connection's own
        rest = true;
        most = std::max(most, recording.messages - messages_before - from_ring);
      }
      // Every STEP, and every timer TICK, moves the job's clock.
      for (std::uint64_t k = before; k < recording.clock_moves; ++k) folder.Tick();
      const auto now = std::chrono::steady_clock::now();
      if (!c.first_read) {  // read now only while no sample came: the read below does then
        c.first_read = true;
        if (recording.samples.empty()) {
          c.first_ok = ReadPrivateMemory(job.images[c.image].pid, c.first_rss, c.first_pss);
        }
      }
      const bool alone = !SharesWithRelatives(recording);
      if (!recording.samples.empty() && !recording.samples.back().has_private) {
        WatchSample &last = recording.samples.back();
        // Alone, once a read of smaps_rollup succeeded (until then, at the dense pace).
        const bool sparse = alone && c.last_pss != 0;
        if (now - c.private_read >= (sparse ? kPrivateMemoryAlone : c.private_every)) {
          last.has_private =
              ReadPrivateMemory(job.images[c.image].pid, last.rss_bytes, last.pss_bytes);
          c.private_read = c.resident_read = now;
          if (last.has_private) c.last_pss = last.pss_bytes;
          c.private_every = std::clamp<std::chrono::steady_clock::duration>(
              (std::chrono::steady_clock::now() - now) * kPrivateMemoryShare, kPrivateMemoryEvery,
              kPrivateMemoryLongest);
        } else if (sparse && now - c.resident_read >= kPrivateMemoryEvery) {
          last.has_private = ReadResident(job.images[c.image].pid, last.rss_bytes);
          last.pss_bytes = c.last_pss;
          c.resident_read = now;
        }
      }
      // The first samples arrived and no read of them succeeded (the process had ended): the
      // value read when it connected stands for them. Not when one did: an early value would
      // become the series' first and overstate its rise.
      if (c.first_ok && !c.first_given && !recording.samples.empty()) {
        c.first_given = true;
        const bool any = std::any_of(recording.samples.begin(), recording.samples.end(),
                                     [](const WatchSample &s) { return s.has_private; });
        if (!any) {
          WatchSample &first = recording.samples.front();
          first.has_private = true;
          first.rss_bytes = c.first_rss;
          first.pss_bytes = c.first_pss;
        }
      }
      if (!open) {
        ::close(c.fd);
        c.fd = -1;
        out_of_descriptors = false;  // a descriptor is free again
      }
    }
    connections.erase(std::remove_if(connections.begin(), connections.end(),
                                     [](const Connection &c) { return c.fd < 0; }),
                      connections.end());
    ring_wait = ring_brought ? kRingEvery : std::min(ring_wait * 2, kRingQuiet);
    unsigned char bytes[64];
    for (ssize_t got; (got = ::read(g_signal_pipe[0], bytes, sizeof bytes)) > 0;) {
      for (ssize_t i = 0; i < got; ++i) {
        if (bytes[i] == SIGCHLD) continue;
        if (bytes[i] == SIGCONT) {  // continued: the program gets the terminal if watch has it
          hand_on();
          continue;
        }
        forward(bytes[i]);
      }
    }
    for (;;) {
      int status = 0;
      rusage usage{};
      const pid_t waited = ::wait4(-1, &status, WNOHANG | WUNTRACED, &usage);
      if (waited <= 0) break;
      if (waited == child && WIFSTOPPED(status)) {
        // A job-control stop on a terminal (Ctrl-Z, or SIGTTIN / SIGTTOU in the background):
        // watch takes the terminal back and stops its own group, so that the shell sees the job
        // stopped; when the job is continued (fg: watch holds the terminal again, bg: it does
        // not), so is the program. Any other stop (SIGSTOP from a debugger) is the stopper's.
        const int stop = WSTOPSIG(status);
        // Watch in the foreground (fg after bg): the terminal goes on to the program.
        if ((stop == SIGTTIN || stop == SIGTTOU) && hand_on()) continue;
        if (terminal.fd() >= 0 && (stop == SIGTSTP || stop == SIGTTIN || stop == SIGTTOU)) {
          terminal.TakeBack(child);
          ::kill(0, SIGTSTP);  // discarded by the kernel in an orphaned group: then go on
          terminal.GiveTo(child);
          ::kill(-child, SIGCONT);
        }
        continue;
      }
      if (WIFSTOPPED(status)) continue;
      if (waited == child) {
        root_done = true;
        root_status = status;
        job.root_peak_rss_kib = usage.ru_maxrss;
        terminal.TakeBack(child);
      } else {
        reaped[static_cast<std::uint64_t>(waited)] = status;
      }
    }
    // The job ends when its first process has ended, no connection is open and no orphan of the
    // job is left below watch.
    if (root_done && stop_waiting) break;
    if (root_done && connections.empty()) {
      accept_all();  // a connection still queued: its records come first
      if (!connections.empty()) continue;
      int status = 0;
      errno = 0;
      const pid_t waited = ::waitpid(-1, &status, WNOHANG | __WALL);
      if (waited > 0) {
        reaped[static_cast<std::uint64_t>(waited)] = status;
        continue;
      }
      if (waited < 0 && errno == ECHILD) break;
    }
  }
  for (const Connection &c : connections) {  // what they sent until watch stopped waiting
    Drain(c.fd, *c.ring, job.images[c.image].recording, false);
    job.images[c.image].recording.still_running = true;
  }
  for (const Connection &c : connections) ::close(c.fd);
  if (stop_waiting && !connections.empty()) {
    job.refused.push_back(std::to_string(connections.size()) +
                          " process(es) of the job still running when a signal stopped the wait "
                          "after the first process had ended (judged on what they sent)");
  }
  terminal.TakeBack(child);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);

  // Endings: the root's last image ends with the root's status; an orphan watch reaped, with
  // its own; any other with what its connection says (its parent, not watch, reaped it).
  size_t last_root = job.images.size();
  for (size_t i = 0; i < job.images.size(); ++i) {
    if (job.images[i].root) last_root = i;
  }
  for (size_t i = 0; i < job.images.size(); ++i) {
    WatchImage &image = job.images[i];
    WatchRecording &r = image.recording;
    r.forwarded_signal = forwarded_first;
    r.forwarded_mask = forwarded_mask;
    int status = 0;
    bool known = false;
    if (i == last_root) {
      status = root_status;
      known = true;
    } else if (const auto it = reaped.find(image.pid); it != reaped.end() && [&] {
                 for (size_t k = i + 1; k < job.images.size(); ++k) {
                   if (job.images[k].pid == image.pid) return false;  // it exec'd again
                 }
                 return true;
               }()) {
      status = it->second;
      known = true;
    }
    r.status_known = known;
    r.expect_bye = image.root;
    if (known) {
      r.exited = WIFEXITED(status);
      r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      r.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    r.device_expected = image.root && (options.cuda || LooksLikeCuda(program));
    if (!r.probe_states.count("cupti")) {
      const bool any_device = std::any_of(r.samples.begin(), r.samples.end(),
                                          [](const WatchSample &s) { return s.has_device; });
      if (r.device_expected || any_device) r.device_absent_reason = DeviceAbsentReason(paths);
    }
  }
  if (last_root == job.images.size()) {
    // The root never connected (a static or setuid program, or one that ended before its
    // preload started): its ending still counts, first in the job.
    WatchImage image;
    image.pid = job.root_pid;
    image.root = true;
    WatchRecording &r = image.recording;
    r.exited = WIFEXITED(root_status);
    r.exit_status = WIFEXITED(root_status) ? WEXITSTATUS(root_status) : 0;
    r.term_signal = WIFSIGNALED(root_status) ? WTERMSIG(root_status) : 0;
    r.forwarded_signal = forwarded_first;
    r.forwarded_mask = forwarded_mask;
    r.device_expected = options.cuda || LooksLikeCuda(program);
    if (r.device_expected) r.device_absent_reason = DeviceAbsentReason(paths);
    job.images.insert(job.images.begin(), std::move(image));
  }
  // An image followed by another of the same pid was replaced by exec; one that sent nothing
  // (a fork between fork and exec, a shell's subshell before exec) is left out.
  for (size_t i = 0; i < job.images.size(); ++i) {
    for (size_t k = i + 1; k < job.images.size(); ++k) {
      if (job.images[k].pid == job.images[i].pid) job.images[i].recording.replaced_by_exec = true;
    }
  }
  job.images.erase(std::remove_if(job.images.begin(), job.images.end(),
                                  [](const WatchImage &image) {
                                    return image.recording.replaced_by_exec &&
                                           image.recording.samples.empty() &&
                                           image.recording.forks == 0;
                                  }),
                   job.images.end());
  for (const auto &[pid, u] : unseen) {
    if (u.scans < 2) continue;
    job.not_observed.push_back("`" + (u.command_line.empty() ? "?" : u.command_line) + "` (pid " +
                               std::to_string(pid) + "): " + u.reason);
  }
  if (unverified > 0) {
    job.refused.push_back(std::to_string(unverified) +
                          " connection(s) from processes that had ended before watch could check "
                          "them (summarised, never judged: a process must be seen to be in the "
                          "job to decide its verdict)");
  }
  job.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (WatchImage &image : job.images) image.recording.wall_seconds = job.wall_seconds;
  if (exec_failed) {
    throw WatchUsageError("cannot run '" + options.command.front() + "': " + std::strerror(error));
  }
  return job;
}

}  // namespace leakbound::watch
