// The job's folder (its socket and clock page) and what /proc says of the job's processes:
// parents, command lines, RANK, why one never connected, private memory.
#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "internal.h"

namespace leakbound::watch::detail {

namespace {

// The folders of watches that died without removing theirs (killed outright: SIGKILL, a CI job's
// hard timeout): leakbound-watch-PID-XXXXXX in `base`, this user's, whose PID is gone and whose
// socket refuses a connection (a listener there is a live watch, e.g. in another PID namespace
// that shares the folder; a folder named the older way, without a PID, is left alone).
void SweepStaleFolders(const std::string &base) {
  DIR *dir = ::opendir(base.c_str());
  if (dir == nullptr) return;
  const std::string_view prefix = "leakbound-watch-";
  std::vector<fs::path> stale;
  while (const dirent *entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name.substr(0, prefix.size()) != prefix) continue;
    name.remove_prefix(prefix.size());
    const size_t dash = name.find('-');
    if (dash == std::string_view::npos || dash == 0) continue;
    long pid = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + dash, pid);
    if (error != std::errc() || end != name.data() + dash || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    const fs::path folder = fs::path(base) / entry->d_name;
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) {
      continue;
    }
    const std::string socket_path = (folder / "socket").string();
    sockaddr_un address{};
    if (socket_path.size() >= sizeof address.sun_path) continue;
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
    // Non-blocking: a live listener with a full backlog answers EAGAIN at once, never a wait.
    // Only a refusal is stale: no socket yet may be a live watch between mkdtemp and bind.
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    const bool refused = ::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 &&
                         errno == ECONNREFUSED;
    ::close(fd);
    if (refused) stale.push_back(folder);
  }
  ::closedir(dir);
  for (const fs::path &folder : stale) {
    std::error_code ignored;
    fs::remove_all(folder, ignored);
  }
}

}  // namespace

JobFolder::JobFolder() {
  std::string base = "/tmp";
  if (const char *tmp = std::getenv("TMPDIR"); tmp && *tmp && std::strlen(tmp) < 64) base = tmp;
  SweepStaleFolders(base);
  const std::string name = "/leakbound-watch-" + std::to_string(::getpid()) + "-XXXXXX";
  std::string pattern = base + name;
  if (::mkdtemp(pattern.data()) == nullptr) {
    SweepStaleFolders("/tmp");
    pattern = "/tmp" + name;
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

void JobFolder::Remove() {
  if (clock_) ::munmap(clock_, 4096);
  clock_ = nullptr;
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

// /proc/PID/NAME's text, "" when it cannot be read. With open and read, not an ifstream: the
// scan for the job's processes (every 200 ms) reads every process's stat file, and an ifstream's
// construction (its locale and facets) was most of its cost: ~1.5% of a core while a program ran.
std::string ReadProcFile(std::uint64_t pid, const char *name) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%llu/%s", static_cast<unsigned long long>(pid), name);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The parent of pid, 0 when it is gone: the fourth field of its stat line, after the name in
// parentheses (which may hold spaces and parentheses itself).
std::uint64_t ParentOf(std::uint64_t pid) {
  const std::string stat = ReadProcFile(pid, "stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  const char *at = stat.c_str() + close + 1;
  while (*at == ' ') ++at;
  if (*at == '\0') return 0;
  ++at;  // the state letter
  while (*at == ' ') ++at;
  std::uint64_t parent = 0;
  const char *end = stat.c_str() + stat.size();
  if (std::from_chars(at, end, parent).ec != std::errc{}) return 0;
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

namespace {

// The numeric entries of a /proc directory (processes, or a process's threads); empty when it
// cannot be read (the process ended). readdir, not a directory_iterator: no path object per entry.
std::vector<std::uint64_t> NumericEntries(const char *path) {
  std::vector<std::uint64_t> numbers;
  if (DIR *dir = ::opendir(path)) {
    while (const dirent *entry = ::readdir(dir)) {
      const char *name = entry->d_name;
      const char *end = name + std::strlen(name);
      std::uint64_t number = 0;
      const auto [rest, error] = std::from_chars(name, end, number);
      if (error == std::errc{} && rest == end && number != 0) numbers.push_back(number);
    }
    ::closedir(dir);
  }
  return numbers;
}

}  // namespace

std::map<std::uint64_t, std::uint64_t> JobProcessesByParent() {
  std::map<std::uint64_t, std::uint64_t> parent_of;
  for (const std::uint64_t pid : NumericEntries("/proc")) {
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

// The processes below watch now: pid -> parent. Walked down from watch through the children of
// each thread of each process found (/proc/PID/task/TID/children), so that a scan reads as many
// files as the job has threads: one pass over /proc read the stat of every process on the
// machine, every kScanEvery (with 1,000 other processes on this 2-core VM, 10% of a core for the
// watcher over `watch -- sleep 2`). A child created or ended during the walk may be missed, as
// one made between the pass's readdir and its reads was: the next scan finds it. Kernels without
// CONFIG_PROC_CHILDREN (no children file) get the pass over /proc.
std::map<std::uint64_t, std::uint64_t> JobProcesses() {
  const auto self = static_cast<std::uint64_t>(::getpid());
  static const bool have_children = [self] {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%llu/task/%llu/children",
                  static_cast<unsigned long long>(self), static_cast<unsigned long long>(self));
    return ::access(path, R_OK) == 0;
  }();
  if (!have_children) return JobProcessesByParent();
  std::map<std::uint64_t, std::uint64_t> job;
  std::vector<std::uint64_t> pending = {self};
  while (!pending.empty()) {
    const std::uint64_t pid = pending.back();
    pending.pop_back();
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%llu/task", static_cast<unsigned long long>(pid));
    for (const std::uint64_t tid : NumericEntries(path)) {
      char name[48];
      std::snprintf(name, sizeof name, "task/%llu/children", static_cast<unsigned long long>(tid));
      const std::string children = ReadProcFile(pid, name);
      const char *at = children.c_str();
      const char *end = at + children.size();
      while (at < end) {
        std::uint64_t child = 0;
        const auto [rest, error] = std::from_chars(at, end, child);
        if (error != std::errc{}) {
          ++at;  // the space between two
          continue;
        }
        at = rest;
        // A pid met twice (reused while the walk went on) is followed once.
        if (child != 0 && child != self && job.emplace(child, pid).second) pending.push_back(child);
      }
    }
  }
  return job;
}

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

bool ReadResident(std::uint64_t pid, std::uint64_t &rss) {
  std::istringstream statm(ReadProcFile(pid, "statm"));
  std::uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return false;
  static const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  rss = resident * page;
  return true;
}

}  // namespace leakbound::watch::detail
