// `leakbound watch`: starting the program under the preload and receiving the records of every
// process of the job (docs/watch.md, "Process trees"). Each process image connects on its own to
// a SOCK_SEQPACKET socket in a folder only this user can enter (mode 0700; one record per
// message, never interleaved; a vanished watcher is EPIPE in the program, not SIGPIPE); a
// connection is kept only from a process of the job: the same uid (SO_PEERCRED) and a pid whose
// ancestors lead to watch (a subreaper, so orphans of the job stay below it). Up to
// kMessagesPerRead messages are read per recvmmsg. Signals received here are forwarded to the
// program's process group and to every process of the job outside it.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "leakbound/harness/cupti/observer.h"
#include "leakbound/watch/heap.h"
#include "watch_session.h"

extern char **environ;

namespace leakbound::harness::watch {
namespace fs = std::filesystem;

namespace {

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

// The child's environment.
std::vector<std::string> ChildEnvironment(const WatchOptions &options, const WatchPaths &paths,
                                          const fs::path &socket, const fs::path &clock) {
  std::map<std::string, std::string> set;
  set["LD_PRELOAD"] = Prepended("LD_PRELOAD", paths.preload.string(), ':');
  set[LEAKBOUND_WATCH_ENV_SOCKET] = socket.string();
  set[LEAKBOUND_WATCH_ENV_CLOCK] = clock.string();
  set["LEAKBOUND_WATCH_PARENT"] = std::to_string(::getpid());  // tells the first process
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
    // The variables of an older protocol (a watch inside a watched job sets its own).
    if (!set.count(key) && key != "LEAKBOUND_WATCH_FD" && key != "LEAKBOUND_WATCH_PID" &&
        key != "LEAKBOUND_WATCH_CHANNEL") {
      env.push_back(entry);
    }
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
    case LEAKBOUND_WATCH_HELLO: {  // the image's series starts (again: it began to mark steps)
      const std::vector<std::string> notes = recording.notes;
      const std::string role = recording.role;
      const std::uint64_t restarts = recording.hello ? recording.restarts + 1 : 0;
      const std::uint64_t clock_moves = recording.clock_moves;
      recording = WatchRecording{};
      recording.notes = notes;
      recording.role = role;
      recording.restarts = restarts;
      recording.clock_moves = clock_moves;
      recording.hello = true;
      recording.origin = static_cast<int>(record.site);
      recording.parent_pid = record.seq;
      recording.fork_index = record.values[0];
      recording.exe_dev = record.values[1];
      recording.exe_ino = record.values[2];
      recording.heap_state = text;
      recording.at_start = record.counters;
      break;
    }
    case LEAKBOUND_WATCH_ROLE:
      recording.role = text;
      break;
    case LEAKBOUND_WATCH_STEP:
    case LEAKBOUND_WATCH_TICK: {
      if (record.kind == LEAKBOUND_WATCH_TICK && record.site == 1) {
        recording.at_clock = true;
      } else {
        ++recording.clock_moves;
      }
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
  if (replaced_by_exec) return "exec'd a new program";
  if (still_running) return "still running when watch stopped waiting";
  if (!status_known) return "ended (its parent, not watch, collected its status)";
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

namespace {

// The folder the job's processes connect through: mode 0700 (no other user can reach the
// socket), in $TMPDIR when its path fits a socket address, else /tmp. Holds the listening socket
// and the job's clock page; removed when the recording ends.
class JobFolder {
 public:
  JobFolder() {
    std::string base = "/tmp";
    if (const char *tmp = std::getenv("TMPDIR"); tmp && *tmp && std::strlen(tmp) < 64) base = tmp;
    std::string pattern = base + "/leakbound-watch-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      pattern = "/tmp/leakbound-watch-XXXXXX";
      if (::mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error(std::string("watch: cannot make a private folder in /tmp: ") +
                                 std::strerror(errno));
      }
    }
    dir_ = pattern;
    socket_path_ = dir_ / "socket";
    clock_path_ = dir_ / "clock";
    listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket_path_.c_str(), sizeof address.sun_path - 1);
    if (listen_fd_ < 0 ||
        ::bind(listen_fd_, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::listen(listen_fd_, SOMAXCONN) != 0) {
      const int error = errno;
      Remove();
      throw std::runtime_error(std::string("watch: cannot listen on ") + socket_path_.string() +
                               ": " + std::strerror(error));
    }
    const int clock_fd = ::open(clock_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    void *page = MAP_FAILED;
    if (clock_fd >= 0 && ::ftruncate(clock_fd, 4096) == 0) {
      page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, clock_fd, 0);
    }
    if (clock_fd >= 0) ::close(clock_fd);
    if (page == MAP_FAILED) {
      const int error = errno;
      Remove();
      throw std::runtime_error(std::string("watch: cannot make the job's clock in ") +
                               dir_.string() + ": " + std::strerror(error));
    }
    clock_ = static_cast<std::uint64_t *>(page);
  }
  ~JobFolder() { Remove(); }
  JobFolder(const JobFolder &) = delete;
  JobFolder &operator=(const JobFolder &) = delete;
  int listen_fd() const { return listen_fd_; }
  const fs::path &socket_path() const { return socket_path_; }
  const fs::path &clock_path() const { return clock_path_; }
  // A step (or timer sample) of some process: every process that marks none samples itself.
  void Tick() { std::atomic_ref<std::uint64_t>(*clock_).fetch_add(1, std::memory_order_relaxed); }

 private:
  void Remove() {
    if (clock_) ::munmap(clock_, 4096);
    clock_ = nullptr;
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_, socket_path_, clock_path_;
  int listen_fd_ = -1;
  std::uint64_t *clock_ = nullptr;
};

std::string ReadProcFile(std::uint64_t pid, const char *name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + name, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The parent of pid, 0 when it is gone.
std::uint64_t ParentOf(std::uint64_t pid) {
  const std::string stat = ReadProcFile(pid, "stat");
  const size_t close = stat.rfind(')');  // the name may hold spaces and parentheses
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 1));
  char state = 0;
  std::uint64_t parent = 0;
  rest >> state >> parent;
  return parent;
}

// Whether pid is a process of the job: its ancestors lead to watch. An ancestor that ends while
// the chain is walked (a daemon's middle process) reparents its children to watch (a subreaper):
// the walk starts again.
bool InJob(std::uint64_t pid) {
  const auto self = static_cast<std::uint64_t>(::getpid());
  for (int attempt = 0; attempt < 4; ++attempt) {
    bool vanished = false;
    std::uint64_t at = pid;
    for (int hops = 0; at > 1 && hops < 4096; ++hops) {
      const std::uint64_t parent = ParentOf(at);
      if (parent == self) return true;
      if (parent == 0 && at != pid) vanished = true;
      at = parent;
    }
    if (!vanished) return false;
  }
  return false;
}

std::string CommandLineOf(std::uint64_t pid) {
  std::string line = ReadProcFile(pid, "cmdline");
  while (!line.empty() && line.back() == '\0') line.pop_back();
  std::replace(line.begin(), line.end(), '\0', ' ');
  return line;
}

std::string RankOf(std::uint64_t pid) {
  const std::string environ_text = ReadProcFile(pid, "environ");
  for (size_t at = 0; at < environ_text.size();) {
    const size_t end = std::min(environ_text.find('\0', at), environ_text.size());
    if (environ_text.compare(at, 5, "RANK=") == 0) return environ_text.substr(at + 5, end - at - 5);
    at = end + 1;
  }
  return {};
}

// Why a process of the job never connected, from what /proc says of it.
std::string WhyNotObserved(std::uint64_t pid, const std::string &preload) {
  struct stat exe {};
  const std::string proc = "/proc/" + std::to_string(pid);
  if (::stat((proc + "/exe").c_str(), &exe) == 0 && (exe.st_mode & (S_ISUID | S_ISGID))) {
    return "a setuid/setgid program: the loader ignores LD_PRELOAD for it";
  }
  const std::string environ_text = ReadProcFile(pid, "environ");
  if (environ_text.find(preload) == std::string::npos) {
    return "its environment does not carry watch's LD_PRELOAD (cleared, e.g. `env -i`)";
  }
  // A static executable has no PT_INTERP program header: no dynamic loader to preload into.
  std::ifstream elf(proc + "/exe", std::ios::binary);
  unsigned char ident[64] = {};
  if (elf.read(reinterpret_cast<char *>(ident), sizeof ident) && ident[0] == 0x7f &&
      ident[1] == 'E' && ident[4] == 2 /* 64-bit */) {
    std::uint64_t phoff = 0;
    std::uint16_t phentsize = 0, phnum = 0;
    std::memcpy(&phoff, ident + 32, 8);
    std::memcpy(&phentsize, ident + 54, 2);
    std::memcpy(&phnum, ident + 56, 2);
    bool interp = false;
    for (std::uint16_t i = 0; i < phnum && phentsize >= 4; ++i) {
      std::uint32_t type = 0;
      elf.seekg(static_cast<std::streamoff>(phoff + std::uint64_t(i) * phentsize));
      if (!elf.read(reinterpret_cast<char *>(&type), 4)) break;
      if (type == 3 /* PT_INTERP */) interp = true;
    }
    if (!interp) return "a static executable: there is no dynamic loader to preload into";
  }
  return "it never connected (it ended before the preload started, or its preload could not "
         "reach watch)";
}

// The processes below watch now: pid -> parent, from one pass over /proc.
std::map<std::uint64_t, std::uint64_t> JobProcesses() {
  std::map<std::uint64_t, std::uint64_t> parent_of;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::uint64_t pid = std::stoull(name);
    if (const std::uint64_t parent = ParentOf(pid); parent != 0) parent_of[pid] = parent;
  }
  const auto self = static_cast<std::uint64_t>(::getpid());
  std::map<std::uint64_t, std::uint64_t> job;
  for (const auto &[pid, parent] : parent_of) {
    std::uint64_t at = pid;
    for (int hops = 0; at > 1 && hops < 4096; ++hops) {
      const auto up = parent_of.find(at);
      if (up == parent_of.end()) break;
      if (up->second == self) {
        job[pid] = parent;
        break;
      }
      at = up->second;
    }
  }
  return job;
}

// A process of the job seen on /proc but not (yet) connected.
struct Unseen {
  std::string command_line;
  std::string reason;
  int scans = 0;
};

// A connection of the job, open until its process image ends.
struct Connection {
  int fd = -1;
  size_t image = 0;  // index in WatchJob::images
  std::chrono::steady_clock::time_point private_read{};  // the last smaps_rollup read
};

// How often watch looks on /proc for processes of the job that never connected.
constexpr auto kScanEvery = std::chrono::milliseconds(200);

// How often a process's private memory is read at most (smaps_rollup walks its page tables).
constexpr auto kPrivateMemoryEvery = std::chrono::milliseconds(50);

// Rss and Pss of pid in bytes (smaps_rollup, kB); false when it cannot be read.
bool ReadPrivateMemory(std::uint64_t pid, std::uint64_t &rss, std::uint64_t &pss) {
  std::istringstream rollup(ReadProcFile(pid, "smaps_rollup"));
  bool have_rss = false, have_pss = false;
  for (std::string line; std::getline(rollup, line);) {
    std::uint64_t kb = 0;
    if (line.rfind("Rss:", 0) == 0 && std::sscanf(line.c_str() + 4, "%lu", &kb) == 1) {
      rss = kb * 1024;
      have_rss = true;
    } else if (line.rfind("Pss:", 0) == 0 && std::sscanf(line.c_str() + 4, "%lu", &kb) == 1) {
      pss = kb * 1024;
      have_pss = true;
    }
  }
  return have_rss && have_pss;
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
  if (child == 0) {  // async-signal-safe only
    if (have_files) ::setrlimit(RLIMIT_NOFILE, &files);
    ::setpgid(0, 0);
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
  const auto forward = [&](int s) {
    if (forwarded_first == 0) forwarded_first = s;
    forwarded_mask |= 1ull << s;
    ::kill(-child, s);
    for (const Connection &c : connections) {  // processes of the job outside its group
      const auto pid = static_cast<pid_t>(job.images[c.image].pid);
      if (pid != child && ::getpgid(pid) != child) ::kill(pid, s);
    }
  };

  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    fds.push_back({folder.listen_fd(), static_cast<short>(out_of_descriptors ? 0 : POLLIN), 0});
    for (const Connection &c : connections) fds.push_back({c.fd, POLLIN, 0});
    // Without SIGCHLD for orphans that end while nothing is sent, look again now and then.
    const int ready = ::poll(fds.data(), fds.size(), 200);
    if (ready < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) accept_all();
    if (const auto now = std::chrono::steady_clock::now(); now - last_scan >= kScanEvery) {
      scan();
      last_scan = now;
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      Connection &c = connections[i - 2];
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      WatchRecording &recording = job.images[c.image].recording;
      const std::uint64_t before = recording.clock_moves;
      const bool open = Drain(c.fd, recording, false);
      // Every STEP, and every timer TICK, moves the job's clock.
      for (std::uint64_t k = before; k < recording.clock_moves; ++k) folder.Tick();
      const auto now = std::chrono::steady_clock::now();
      if (!recording.samples.empty() && !recording.samples.back().has_private &&
          now - c.private_read >= kPrivateMemoryEvery) {
        WatchSample &last = recording.samples.back();
        last.has_private =
            ReadPrivateMemory(job.images[c.image].pid, last.rss_bytes, last.pss_bytes);
        c.private_read = now;
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
    unsigned char bytes[64];
    for (ssize_t got; (got = ::read(g_signal_pipe[0], bytes, sizeof bytes)) > 0;) {
      for (ssize_t i = 0; i < got; ++i) {
        if (bytes[i] == SIGCHLD) continue;
        forward(bytes[i]);
        if (root_done) stop_waiting = true;
      }
    }
    for (;;) {
      int status = 0;
      const pid_t waited = ::waitpid(-1, &status, WNOHANG | WUNTRACED);
      if (waited <= 0) break;
      if (waited == child && WIFSTOPPED(status)) {
        // A job-control stop on a terminal (Ctrl-Z, or SIGTTIN / SIGTTOU in the background):
        // watch takes the terminal back and stops its own group, so that the shell sees the job
        // stopped; when the job is continued (fg: watch holds the terminal again, bg: it does
        // not), so is the program. Any other stop (SIGSTOP from a debugger) is the stopper's.
        const int stop = WSTOPSIG(status);
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
    Drain(c.fd, job.images[c.image].recording, false);
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
  if (!job.images.empty() && last_root == job.images.size()) {
    // The root never connected (a static or setuid program): its ending still counts.
    WatchImage image;
    image.pid = job.root_pid;
    image.root = true;
    image.command_line = "";
    WatchRecording &r = image.recording;
    r.exited = WIFEXITED(root_status);
    r.exit_status = WIFEXITED(root_status) ? WEXITSTATUS(root_status) : 0;
    r.term_signal = WIFSIGNALED(root_status) ? WTERMSIG(root_status) : 0;
    r.forwarded_signal = forwarded_first;
    r.forwarded_mask = forwarded_mask;
    job.images.insert(job.images.begin(), std::move(image));
  } else if (job.images.empty()) {
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
    job.images.push_back(std::move(image));
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

}  // namespace leakbound::harness::watch
