// `leakbound watch`: starting the program under the preload and receiving its
// records. The channel is a SOCK_SEQPACKET socket pair (one record per message,
// never interleaved; a vanished parent is EPIPE in the child, not SIGPIPE; read
// up to kMessagesPerRead messages per recvmmsg); its
// child end is named by LEAKBOUND_WATCH_FD, and only the process whose pid is
// LEAKBOUND_WATCH_PID reports (forked children stay silent). SIGINT/SIGTERM
// received here are forwarded to the program's process group.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "leakbound/harness/cupti/observer.h"
#include "leakbound/watch/heap.h"
#include "watch_session.h"

extern char **environ;

namespace leakbound::harness::watch {
namespace fs = std::filesystem;

namespace {

// Where the child's end of the channel goes (lower when the descriptor limit is lower).
constexpr long kChannelFd = 1000;

int g_signal_pipe[2] = {-1, -1};

// Signals watch passes on to the program's process group, each time one arrives (a program may
// finish its epoch on the first SIGINT and stop on the second). SIGCHLD only wakes the loop.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// One byte per signal into the pipe the loop polls: no signal is lost or merged.
void OnSignal(int signal_number) {
  const int saved = errno;
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] ssize_t ignored = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

std::string SignalName(int signal_number) {
  const char *abbrev = sigabbrev_np(signal_number);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal_number);
}

fs::path SelfDirectory() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path();
}

fs::path FirstExisting(const char *env, const std::vector<fs::path> &candidates) {
  if (const char *named = std::getenv(env); named && *named) return named;
  for (const fs::path &candidate : candidates) {
    std::error_code ec;
    if (fs::exists(candidate, ec)) return fs::weakly_canonical(candidate, ec);
  }
  return {};
}

// PATH lookup as execvp does it, done up front so that "not found" is a usage
// error before anything is created.
fs::path ResolveCommand(const std::string &command) {
  if (command.find('/') != std::string::npos) {
    if (::access(command.c_str(), X_OK) != 0) {
      throw WatchUsageError("cannot run '" + command + "': " + std::strerror(errno) +
                            " (check the path after `--`)");
    }
    return command;
  }
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / command;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
    start = end + 1;
  }
  throw WatchUsageError("command '" + command +
                        "' not found in PATH (give its path, or install "
                        "it; everything after `--` is the program and its arguments)");
}

std::string Prepended(const char *name, const std::string &first, char separator) {
  const char *old = std::getenv(name);
  if (!old || !*old) return first;
  return first + separator + old;
}

// The child's environment, except LEAKBOUND_WATCH_PID, which is only known
// after fork.
std::vector<std::string> ChildEnvironment(const WatchOptions &options, const WatchPaths &paths,
                                          int channel_fd) {
  std::map<std::string, std::string> set;
  set["LD_PRELOAD"] = Prepended("LD_PRELOAD", paths.preload.string(), ':');
  set[LEAKBOUND_WATCH_ENV_FD] = std::to_string(channel_fd);
  struct stat channel {};
  if (::fstat(channel_fd, &channel) == 0) {
    set[LEAKBOUND_WATCH_ENV_CHANNEL] = std::to_string(static_cast<unsigned long long>(channel.st_ino));
  }
  set[LEAKBOUND_WATCH_ENV_SITES] = options.call_sites ? "1" : "0";
  if (!options.keep_pymalloc) set["PYTHONMALLOC"] = "malloc";
  if (!paths.python.empty()) {
    std::string python_path = (paths.python).string();
    if (!options.step_on.empty()) python_path += ":" + (paths.python / "sitecustomize").string();
    set["PYTHONPATH"] = Prepended("PYTHONPATH", python_path, ':');
  }
  if (!options.step_on.empty()) set[LEAKBOUND_WATCH_ENV_STEP_ON] = options.step_on;
  // The driver loads the injection only if the program initialises CUDA:
  // harmless otherwise. Another tool's injection already in the environment is
  // left in place (see DeviceSide).
  const char *other_injection = std::getenv("CUDA_INJECTION64_PATH");
  if (!paths.cuda_injection.empty() && (other_injection == nullptr || !*other_injection)) {
    set["CUDA_INJECTION64_PATH"] = paths.cuda_injection.string();
  }
  if (!options.step_range.empty()) {
    set[LEAKBOUND_WATCH_ENV_STEP_RANGE] = options.step_range;
    set["NVTX_INJECTION64_PATH"] = paths.nvtx_injection.string();
  }
  if (options.interval_ns > 0) {
    set[LEAKBOUND_WATCH_ENV_INTERVAL] = std::to_string(options.interval_ns);
  }
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (!set.count(key) && key != LEAKBOUND_WATCH_ENV_PID) env.push_back(entry);
  }
  for (const auto &[key, value] : set) env.push_back(key + "=" + value);
  return env;
}

void Consume(const leakbound_watch_record &record, WatchRecording &recording) {
  if (record.magic != LEAKBOUND_WATCH_MAGIC || record.version != LEAKBOUND_WATCH_VERSION) {
    ++recording.malformed_records;
    return;
  }
  const std::string text(record.text, strnlen(record.text, sizeof record.text));
  switch (record.kind) {
    case LEAKBOUND_WATCH_HELLO: {  // a new program image (after exec): start over
      const std::vector<std::string> notes = recording.notes;
      const double wall = recording.wall_seconds;
      recording = WatchRecording{};
      recording.notes = notes;
      recording.wall_seconds = wall;
      recording.hello = true;
      recording.heap_state = text;
      recording.at_start = record.counters;
      break;
    }
    case LEAKBOUND_WATCH_STEP:
    case LEAKBOUND_WATCH_TICK: {
      WatchSample sample = std::move(recording.pending);
      recording.pending = WatchSample{};
      sample.seq = record.seq;
      sample.time_ns = record.time_ns;
      sample.counters = record.counters;
      recording.samples.push_back(std::move(sample));
      break;
    }
    case LEAKBOUND_WATCH_DEVICE:
      recording.pending.has_device = true;
      std::copy(std::begin(record.values), std::end(record.values),
                recording.pending.device.begin());
      break;
    case LEAKBOUND_WATCH_COUNTER:
      if (!text.empty()) recording.pending.framework[text] = record.values[0];
      break;
    case LEAKBOUND_WATCH_PROBE:
      recording.probe_piece += text;
      if (record.site == 0) {
        const size_t tab = recording.probe_piece.find('\t');
        if (tab != std::string::npos) {
          recording.probe_states[recording.probe_piece.substr(0, tab)] =
              recording.probe_piece.substr(tab + 1);
        } else {
          ++recording.malformed_records;
        }
        recording.probe_piece.clear();
      }
      break;
    case LEAKBOUND_WATCH_NAME:
      recording.site_names[record.site] = text;
      break;
    case LEAKBOUND_WATCH_NOTE:
      recording.notes.push_back(text);
      break;
    case LEAKBOUND_WATCH_BYE:
      recording.at_exit = record.counters;
      recording.forks = std::max(recording.forks, record.counters.forks);
      break;
    case LEAKBOUND_WATCH_FORK:
      recording.forks = std::max(recording.forks, record.counters.forks);
      break;
    default:
      ++recording.malformed_records;
  }
}

// A SITES or CENSUS message (channel.h): `count` entries after the record's
// head; its size must match.
void ConsumeSiteBatch(const leakbound_watch_site_batch &batch, size_t size,
                      WatchRecording &recording) {
  const size_t head = offsetof(leakbound_watch_site_batch, entries);
  if (batch.count > LEAKBOUND_WATCH_SITE_BATCH ||
      size != head + batch.count * sizeof(leakbound_watch_site_entry)) {
    ++recording.malformed_records;
    return;
  }
  if (batch.kind == LEAKBOUND_WATCH_CENSUS) {
    recording.pending.has_census = true;
    for (uint32_t i = 0; i < batch.count; ++i) {
      const leakbound_watch_site_entry &entry = batch.entries[i];
      if (entry.site >= LEAKBOUND_HEAP_COHORTS) {
        ++recording.malformed_records;
        continue;
      }
      recording.pending.census[entry.site] = {entry.bytes, entry.allocations};
    }
    return;
  }
  for (uint32_t i = 0; i < batch.count; ++i) {
    const leakbound_watch_site_entry &entry = batch.entries[i];
    recording.site_updates.push_back(
        {recording.samples.size(), entry.site, entry.bytes, entry.allocations});
  }
}

// One message as received: a record, or a SITES batch (told apart by kind; both
// start with the same head).
union WatchMessage {
  leakbound_watch_record record;
  leakbound_watch_site_batch batch;
};

void ConsumeMessage(const WatchMessage &message, size_t size, WatchRecording &recording) {
  if (size >= offsetof(leakbound_watch_site_batch, entries) &&
      message.batch.magic == LEAKBOUND_WATCH_MAGIC &&
      message.batch.version == LEAKBOUND_WATCH_VERSION &&
      (message.batch.kind == LEAKBOUND_WATCH_SITES ||
       message.batch.kind == LEAKBOUND_WATCH_CENSUS)) {
    ConsumeSiteBatch(message.batch, size, recording);
  } else if (size == sizeof message.record) {
    Consume(message.record, recording);
  } else {
    ++recording.malformed_records;
  }
}

// Reads every message waiting on the socket, kMessagesPerRead per recvmmsg;
// returns false once no writer is left.
constexpr unsigned kMessagesPerRead = 64;
bool Drain(int fd, WatchRecording &recording, bool block) {
  static std::vector<WatchMessage> messages(kMessagesPerRead);  // 256 KiB, reused
  std::array<iovec, kMessagesPerRead> vectors{};
  std::array<mmsghdr, kMessagesPerRead> headers{};
  for (;;) {
    for (unsigned i = 0; i < kMessagesPerRead; ++i) {
      vectors[i] = {&messages[i], sizeof(WatchMessage)};
      headers[i] = {};
      headers[i].msg_hdr.msg_iov = &vectors[i];
      headers[i].msg_hdr.msg_iovlen = 1;
    }
    const int got = ::recvmmsg(fd, headers.data(), kMessagesPerRead,
                               block ? MSG_WAITFORONE : MSG_DONTWAIT, nullptr);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
    for (int i = 0; i < got; ++i) {
      // A zero-length message is the end of the stream only once every writer has closed;
      // before that it is a program writing an empty message on the descriptor: skipped.
      if (headers[i].msg_len == 0) {
        pollfd hangup{fd, POLLIN, 0};
        if (::poll(&hangup, 1, 0) < 0 || (hangup.revents & POLLHUP)) return false;
        ++recording.malformed_records;
        continue;
      }
      if (headers[i].msg_hdr.msg_flags & MSG_TRUNC) {
        ++recording.malformed_records;
        continue;
      }
      ConsumeMessage(messages[i], headers[i].msg_len, recording);
    }
    if (got == 0) return false;
    block = false;
  }
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
  // Makes `to` the foreground group if `from` holds it now. SIGTTOU is blocked around the call,
  // so that a process outside the foreground may set it (POSIX). Async-signal-safe.
  static void Hand(int fd, pid_t from, pid_t to) {
    if (fd < 0 || ::tcgetpgrp(fd) != from) return;
    sigset_t ttou, saved;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, &saved);
    ::tcsetpgrp(fd, to);
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
  }
  void GiveTo(pid_t program_group) const { Hand(fd_, ::getpgrp(), program_group); }
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
    for (int s : kForwarded) ::sigaction(s, &action, &saved_[s]);
    ::sigaction(SIGCHLD, &action, &saved_[SIGCHLD]);
  }
  ~SignalForwarding() {
    for (int s : kForwarded) ::sigaction(s, &saved_[s], nullptr);
    ::sigaction(SIGCHLD, &saved_[SIGCHLD], nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }

 private:
  struct sigaction saved_[NSIG] {};
};

// Whether the program looks like a CUDA program: its file names the CUDA
// runtime or driver (a dynamically linked libcudart, or the "libcuda.so.1" a
// static cudart dlopens). Interpreters (python3 + torch) do not: for them the
// device side appears once the injection reports, or with --cuda.
bool LooksLikeCuda(const fs::path &program) {
  std::FILE *file = std::fopen(program.c_str(), "rb");
  if (file == nullptr) return false;
  constexpr std::size_t kLimit = std::size_t{64} << 20;
  std::string bytes(std::size_t{1} << 20, '\0');
  std::string tail;
  bool found = false;
  for (std::size_t total = 0; !found && total < kLimit;) {
    const std::size_t got = std::fread(bytes.data(), 1, bytes.size(), file);
    if (got == 0) break;
    const std::string window = tail + bytes.substr(0, got);
    found = window.find("libcudart.so") != std::string::npos ||
            window.find("libcuda.so") != std::string::npos;
    tail = window.substr(window.size() > 16 ? window.size() - 16 : 0);
    total += got;
  }
  std::fclose(file);
  return found;
}

// Why no injection reported, for a program expected to use CUDA. Without a
// driver the CUDA runtime fails before it loads any injection, so CUPTI's own
// reason is asked for here (CUPTI can do nothing in a process without a driver,
// so asking is harmless).
std::string DeviceAbsentReason(const WatchPaths &paths) {
  const char *other = std::getenv("CUDA_INJECTION64_PATH");
  if (other != nullptr && *other && paths.cuda_injection.string() != other) {
    return std::string("CUDA_INJECTION64_PATH already names ") + other +
           " (another tool's injection); leakbound leaves it in place, unset "
           "it to use the "
           "CUPTI ledger";
  }
  if (paths.cuda_injection.empty()) {
    return "libleakbound_inject.so not found next to leakbound; build the "
           "leakbound_inject "
           "target (needs CUPTI) or set LEAKBOUND_CUDA_INJECTION to its path";
  }
  std::string reason = "the CUDA driver never loaded " + paths.cuda_injection.filename().string();
  if (void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); driver != nullptr) {
    dlclose(driver);
    return reason +
           " (the program made no CUDA call that initialised the "
           "driver, or its CUDA "
           "runtime ignores CUDA_INJECTION64_PATH)";
  }
  harness::cupti::CuptiObserver observer;
  observer.Start();
  return reason +
         " (no CUDA driver: the program's CUDA calls failed before injection); "
         "CUPTI: " +
         observer.StateString();
}

}  // namespace

std::string WatchRecording::Ending() const {
  if (term_signal != 0) {
    std::string text = "killed by " + SignalName(term_signal);
    if (forwarded_mask & (1ull << term_signal)) text += " (forwarded by watch)";
    return text;
  }
  if (exited) return "exited with status " + std::to_string(exit_status);
  return "still running";
}

WatchPaths FindWatchPaths() {
  const fs::path dir = SelfDirectory();
  WatchPaths paths;
  paths.preload =
      FirstExisting("LEAKBOUND_PRELOAD", {dir / "../watch/preload/libleakbound_preload.so",
                                          dir / "../lib/libleakbound_preload.so",
                                          dir / "../lib/leakbound/libleakbound_preload.so"});
  paths.python = FirstExisting("LEAKBOUND_WATCH_PYTHON",
                               {dir / "../watch/python", dir / "../share/leakbound/python"});
  paths.cuda_injection =
      FirstExisting("LEAKBOUND_CUDA_INJECTION", {dir / "../watch/inject/libleakbound_inject.so",
                                                 dir / "../lib/libleakbound_inject.so",
                                                 dir / "../lib/leakbound/libleakbound_inject.so"});
  paths.nvtx_injection = FirstExisting("LEAKBOUND_NVTX_INJECTION",
                                       {dir / "../watch/nvtx/libleakbound_nvtx_inject.so",
                                        dir / "../lib/libleakbound_nvtx_inject.so",
                                        dir / "../lib/leakbound/libleakbound_nvtx_inject.so"});
  return paths;
}

WatchRecording RecordProgram(const WatchOptions &options, const WatchPaths &paths) {
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
  const fs::path program = ResolveCommand(options.command.front());

  int channel[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0) {
    throw std::runtime_error(std::string("watch: socketpair failed: ") + std::strerror(errno));
  }
  // Without CLOEXEC (inherited), and high, out of the way of the numbers a program opens: the
  // lowest free number is what open() returns, and a program run bare has these free.
  rlimit files{};
  const long high = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
                        ? std::min<long>(static_cast<long>(files.rlim_cur) - 1, kChannelFd)
                        : kChannelFd;
  int child_end = ::fcntl(channel[1], F_DUPFD, std::max<long>(high, 10));
  if (child_end < 0) child_end = ::fcntl(channel[1], F_DUPFD, 10);
  ::close(channel[1]);
  std::vector<std::string> env = ChildEnvironment(options, paths, child_end);
  env.push_back(std::string(LEAKBOUND_WATCH_ENV_PID) + "=" + std::string(24, '0'));
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
  const pid_t child = ::fork();
  if (child < 0) {
    ::pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
    throw std::runtime_error(std::string("watch: fork failed: ") + std::strerror(errno));
  }
  if (child == 0) {
    // Async-signal-safe only: write our pid into the preallocated
    // LEAKBOUND_WATCH_PID entry.
    ::setpgid(0, 0);
    char *digits = envp[envp.size() - 2] + std::strlen(LEAKBOUND_WATCH_ENV_PID) + 1;
    pid_t pid = ::getpid();
    char reversed[24];
    int n = 0;
    do {
      reversed[n++] = static_cast<char>('0' + pid % 10);
      pid /= 10;
    } while (pid > 0);
    for (int i = 0; i < n; ++i) digits[i] = reversed[n - 1 - i];
    digits[n] = '\0';
    Terminal::Hand(terminal.fd(), watch_group, ::getpid());
    struct sigaction restore {};
    restore.sa_handler = SIG_DFL;
    for (int s : kForwarded) ::sigaction(s, &restore, nullptr);
    ::sigaction(SIGCHLD, &restore, nullptr);
    ::sigprocmask(SIG_SETMASK, &unblocked, nullptr);
    ::execve(program.c_str(), argv.data(), envp.data());
    const int error = errno;
    [[maybe_unused]] ssize_t ignored = ::write(exec_error[1], &error, sizeof error);
    ::_exit(127);
  }
  ::setpgid(child, child);  // both sides, so the group exists before any signal is forwarded
  terminal.GiveTo(child);
  ::pthread_sigmask(SIG_SETMASK, &unblocked, nullptr);
  ::close(child_end);
  ::close(exec_error[1]);
  int error = 0;
  const bool exec_failed = ::read(exec_error[0], &error, sizeof error) == sizeof error;
  ::close(exec_error[0]);

  WatchRecording recording;
  bool channel_open = true;
  bool done = false;
  while (!done) {
    pollfd fds[2] = {{g_signal_pipe[0], POLLIN, 0}, {channel[0], POLLIN, 0}};
    const int ready = ::poll(fds, channel_open ? 2 : 1, channel_open ? -1 : 200);
    if (ready < 0 && errno != EINTR) break;
    if (channel_open && (fds[1].revents & (POLLIN | POLLHUP))) {
      channel_open = Drain(channel[0], recording, false);
    }
    unsigned char bytes[64];
    for (ssize_t got; (got = ::read(g_signal_pipe[0], bytes, sizeof bytes)) > 0;) {
      for (ssize_t i = 0; i < got; ++i) {
        const int s = bytes[i];
        if (s == SIGCHLD) continue;
        if (recording.forwarded_signal == 0) recording.forwarded_signal = s;
        recording.forwarded_mask |= 1ull << s;
        ::kill(-child, s);
      }
    }
    int status = 0;
    const pid_t waited = ::waitpid(child, &status, WNOHANG | WUNTRACED);
    if (waited == child && WIFSTOPPED(status)) {
      // A job-control stop on a terminal (Ctrl-Z, or SIGTTIN / SIGTTOU in the background): watch
      // takes the terminal back and stops its own group, so that the shell sees the job stopped;
      // when the job is continued (fg: watch holds the terminal again, bg: it does not), so is
      // the program. Any other stop (SIGSTOP from a debugger) is the stopper's to undo.
      const int stop = WSTOPSIG(status);
      if (terminal.fd() >= 0 && (stop == SIGTSTP || stop == SIGTTIN || stop == SIGTTOU)) {
        terminal.TakeBack(child);
        ::kill(0, SIGTSTP);  // discarded by the kernel in an orphaned group: then go on
        terminal.GiveTo(child);
        ::kill(-child, SIGCONT);
      }
      continue;
    }
    if (waited == child) {
      if (channel_open) Drain(channel[0], recording, false);  // what it sent before it ended
      recording.exited = WIFEXITED(status);
      recording.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      recording.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      done = true;
    }
  }
  terminal.TakeBack(child);
  ::close(channel[0]);
  recording.device_expected = options.cuda || LooksLikeCuda(program);
  if (!recording.probe_states.count("cupti")) {
    const bool any_device = std::any_of(recording.samples.begin(), recording.samples.end(),
                                        [](const WatchSample &s) { return s.has_device; });
    if (recording.device_expected || any_device) {
      recording.device_absent_reason = DeviceAbsentReason(paths);
    }
  }
  recording.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (exec_failed) {
    throw WatchUsageError("cannot run '" + options.command.front() + "': " + std::strerror(error));
  }
  return recording;
}

}  // namespace leakbound::harness::watch
