// The program's side of `leakbound watch`: where the injected pieces are, the command, the
// environment the program runs with, and whether it looks like CUDA (docs/watch.md).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "internal.h"
#include "leakbound/cupti/observer.h"

extern char **environ;

namespace leakbound::watch {
namespace fs = std::filesystem;
namespace detail {
namespace {

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

std::string Prepended(const char *name, const std::string &first, char separator) {
  const char *old = std::getenv(name);
  if (!old || !*old) return first;
  return first + separator + old;
}

}  // namespace

// PATH lookup as execvp does it, done up front so that "not found" is a usage
// error before anything is created.
fs::path ResolveCommand(const std::string &command) {
  if (command.find('/') != std::string::npos) {
    std::error_code ignored;
    if (fs::is_directory(command, ignored)) {
      throw WatchUsageError("cannot run '" + command + "': it is a directory (the program to "
                            "watch goes after `--`)");
    }
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

// The child's environment.
std::vector<std::string> ChildEnvironment(const WatchOptions &options, const WatchPaths &paths,
                                          const fs::path &socket, const fs::path &clock) {
  std::map<std::string, std::string> set;
  set["LD_PRELOAD"] = Prepended("LD_PRELOAD", paths.preload.string(), ':');
  set[LEAKBOUND_WATCH_ENV_SOCKET] = socket.string();
  set[LEAKBOUND_WATCH_ENV_CLOCK] = clock.string();
  set["LEAKBOUND_WATCH_PARENT"] = std::to_string(::getpid());  // tells the first process
  set[LEAKBOUND_WATCH_ENV_SITES] = options.call_sites ? "1" : "0";
  if (!options.python_lines) set["LEAKBOUND_PYTHON_LINES"] = "0";
  // Python objects are counted one by one: through malloc (PYTHONMALLOC=malloc, the default),
  // or with --keep-pymalloc through pymalloc's allocator hooks, which the leakbound module
  // installs when it loads (at start-up under --step-on): pymalloc's speed (PYTHONMALLOC=malloc
  // alone made `import torch` ~15% slower), not the default yet (docs/watch.md, "Python").
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

// Whether the program looks like a CUDA program: its file names the CUDA
// runtime or driver (a dynamically linked libcudart, or the "libcuda.so.1" a
// static cudart dlopens). Interpreters (python3 + torch) do not: for them the
// device side appears once the injection reports, or with --cuda.
bool LooksLikeCuda(const fs::path &program) {
  // The file's first 64 MiB, read 64 KiB at a time into one buffer that keeps the last bytes of
  // the read before (a name may straddle two reads), each searched with memmem. (Through strings
  // copied twice a megabyte and string::find it was ~7 ms of the watcher's exit for Debian's
  // python3; a mapping would be faster still, but a file truncated meanwhile, a rebuild after the
  // run, would raise SIGBUS on its lost pages.) The buffer is left uninitialised and small: a
  // zeroed megabyte was 254 of the watcher's 686 page faults after `watch -- /bin/true`, on its
  // exit path.
  const int fd = ::open(program.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  constexpr std::size_t kChunk = std::size_t{64} << 10, kLimit = std::size_t{64} << 20;
  constexpr std::size_t kKeep = 16;  // longer than either name
  const auto storage = std::make_unique_for_overwrite<char[]>(kKeep + kChunk);
  const std::span<char> buffer(storage.get(), kKeep + kChunk);
  std::size_t kept = 0;
  bool found = false;
  for (std::size_t total = 0; !found && total < kLimit;) {
    const ssize_t got = ::read(fd, buffer.data() + kept, kChunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    const std::size_t length = kept + static_cast<std::size_t>(got);
    for (const char *name : {"libcudart.so", "libcuda.so"}) {
      found = found || ::memmem(buffer.data(), length, name, std::strlen(name)) != nullptr;
    }
    kept = std::min(kKeep, length);
    std::memmove(buffer.data(), buffer.data() + length - kept, kept);
    total += static_cast<std::size_t>(got);
  }
  ::close(fd);
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
  cupti::CuptiObserver observer;
  observer.Start();
  return reason +
         " (no CUDA driver: the program's CUDA calls failed before injection); "
         "CUPTI: " +
         observer.StateString();
}

}  // namespace detail

// Where an installed `leakbound` (in <prefix>/bin) finds the libraries and the Python folder:
// relative paths from the install's layout (cmake/LeakboundInstall.cmake), else the defaults.
#ifndef LEAKBOUND_LIB_FROM_BIN
#define LEAKBOUND_LIB_FROM_BIN "../lib"
#endif
#ifndef LEAKBOUND_PYTHON_FROM_BIN
#define LEAKBOUND_PYTHON_FROM_BIN "../share/leakbound/python"
#endif

WatchPaths FindWatchPaths() {
  const fs::path dir = detail::SelfDirectory();
  WatchPaths paths;
  const fs::path lib = dir / LEAKBOUND_LIB_FROM_BIN;
  paths.preload =
      detail::FirstExisting("LEAKBOUND_PRELOAD", {dir / "../watch/preload/libleakbound_preload.so",
                                          lib / "libleakbound_preload.so",
                                          lib / "leakbound/libleakbound_preload.so"});
  paths.python = detail::FirstExisting("LEAKBOUND_WATCH_PYTHON",
                               {dir / "../watch/python", dir / LEAKBOUND_PYTHON_FROM_BIN});
  paths.cuda_injection =
      detail::FirstExisting("LEAKBOUND_CUDA_INJECTION", {dir / "../watch/inject/libleakbound_inject.so",
                                                 lib / "libleakbound_inject.so",
                                                 lib / "leakbound/libleakbound_inject.so"});
  paths.nvtx_injection = detail::FirstExisting("LEAKBOUND_NVTX_INJECTION",
                                       {dir / "../watch/nvtx/libleakbound_nvtx_inject.so",
                                        lib / "libleakbound_nvtx_inject.so",
                                        lib / "leakbound/libleakbound_nvtx_inject.so"});
  return paths;
}

}  // namespace leakbound::watch
