// The watcher's pieces, shared by its source files (not installed): the program's environment
// (environment.cc), receiving records (receive.cc), the job's folder and what /proc says of its
// processes (job_proc.cc). record.cc runs the job with them.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "leakbound/watch/watcher.h"

namespace leakbound::watch::detail {
namespace fs = std::filesystem;

// PATH lookup as execvp does it, done up front so that "not found" is a usage error (throws
// WatchUsageError) before anything is created.
fs::path ResolveCommand(const std::string &command);
// The program's environment: watch's variables (preload, socket, clock, options) on top of
// watch's own.
std::vector<std::string> ChildEnvironment(const WatchOptions &options, const WatchPaths &paths,
                                          const fs::path &socket, const fs::path &clock);
// Whether the program's file names the CUDA runtime or driver.
bool LooksLikeCuda(const fs::path &program);
// Why no injection reported, for a program expected to use CUDA.
std::string DeviceAbsentReason(const WatchPaths &paths);

// The ring a process hands over with its HELLO (channel.h), mapped while its connection is open.
class ChannelRing {
 public:
  ChannelRing() = default;
  ChannelRing(const ChannelRing &) = delete;
  ChannelRing &operator=(const ChannelRing &) = delete;
  ~ChannelRing();
  // Maps the memfd `fd` (taking it: closed either way); "" when mapped, else why not.
  std::string Attach(int fd);
  bool attached() const { return ring_ != nullptr; }
  // Whether messages wait in it (a load of its head).
  bool Pending() const;
  // Reads every message it holds into `recording`. A part that does not fit (a size past the
  // data, or past what was written) is counted malformed and the ring is read no more: false.
  bool Read(WatchRecording &recording);
  // Messages read from it so far, and WAKEs the connection brought for it (neither is the
  // connection's own traffic, which watch's rests follow).
  std::uint64_t messages() const { return messages_; }
  void NoteWake() { ++messages_; }

 private:
  leakbound_watch_ring *ring_ = nullptr;
  std::uint64_t tail_ = 0;
  std::uint64_t messages_ = 0;
  bool broken_ = false;
};

// Reads every message waiting on the connection, then in its ring, into `recording`; false once
// no writer is left (the ring read to its end first).
bool Drain(int fd, ChannelRing &ring, WatchRecording &recording, bool block);

// The folder the job's processes connect through: mode 0700 (no other user can reach the
// socket), in $TMPDIR when its path fits a socket address, else /tmp. Holds the listening socket
// and the job's clock page; removed when the recording ends.
class JobFolder {
 public:
  JobFolder();  // throws std::runtime_error when it cannot be made
  ~JobFolder() { Remove(); }
  JobFolder(const JobFolder &) = delete;
  JobFolder &operator=(const JobFolder &) = delete;
  int listen_fd() const { return listen_fd_; }
  const fs::path &socket_path() const { return socket_path_; }
  const fs::path &clock_path() const { return clock_path_; }
  // A step (or timer sample) of some process: every process that marks none samples itself.
  void Tick() { std::atomic_ref<std::uint64_t>(*clock_).fetch_add(1, std::memory_order_relaxed); }

 private:
  void Remove();
  fs::path dir_, socket_path_, clock_path_;
  int listen_fd_ = -1;
  std::uint64_t *clock_ = nullptr;
};

// /proc/PID/NAME as text ("" when it cannot be read).
std::string ReadProcFile(std::uint64_t pid, const char *name);
// The parent of pid, 0 when it is gone.
std::uint64_t ParentOf(std::uint64_t pid);
// Whether pid is a process of the job: its ancestors lead to watch.
bool InJob(std::uint64_t pid);
// /proc/PID/cmdline with spaces between the arguments.
std::string CommandLineOf(std::uint64_t pid);
// RANK in its environment, if set.
std::string RankOf(std::uint64_t pid);
// Why a process of the job never connected, from what /proc says of it.
std::string WhyNotObserved(std::uint64_t pid, const std::string &preload);
// The processes below watch now: pid -> parent (job_proc.cc: walked down from watch).
std::map<std::uint64_t, std::uint64_t> JobProcesses();
// The same from one pass over /proc, reading every process's parent: JobProcesses's way on a
// kernel without /proc/PID/task/TID/children.
std::map<std::uint64_t, std::uint64_t> JobProcessesByParent();
// Whether the process may share anonymous memory with another of the job: it is a forked child,
// or it forked while watched. Only then can its PSS rise as shared pages are copied (the
// copy-on-read note), so only then is its smaps_rollup read at every sample (record.cc).
inline bool SharesWithRelatives(const WatchRecording &recording) {
  return recording.origin == LEAKBOUND_WATCH_ORIGIN_FORK || recording.forks > 0;
}
// Rss and Pss of pid in bytes (smaps_rollup); false when it cannot be read.
bool ReadPrivateMemory(std::uint64_t pid, std::uint64_t &rss, std::uint64_t &pss);
// Rss of pid in bytes from /proc/PID/statm (the memory's counters: no walk of its page tables,
// ~1% of smaps_rollup's time for a PyTorch process); false when it cannot be read.
bool ReadResident(std::uint64_t pid, std::uint64_t &rss);

// One frame of a call site's stack as the symboliser reads it (symbolize.cc).
// A frame that is a Python line, not an address: kPythonFrame + "FILE:LINE in FUNCTION".
inline constexpr const char *kPythonFrame = "python:";
// A caller found by a stack scan past code of no module (the preload's stack_scan.c), not by the
// unwinder: kScannedFrame + "PATH+0xOFFSET". Shown with ", by stack scan" after its MODULE+0xOFF.
inline constexpr const char *kScannedFrame = "scan:";

struct SiteFrame {
  std::string module_path;  // as the preload sent it ("" when it sent no path)
  std::string where;        // "MODULE+0xOFFSET"
  std::string function;     // demangled, "" when unknown
  std::string file;         // the source file, "" without line tables
  int line = 0;
  // "FUNCTION at FILE:LINE (MODULE+0xOFFSET)", as much of it as is known.
  std::string Display() const;
  // Whether it is the user's code: not a system module (/usr/lib, the interpreter, Python
  // packages, watch's own libraries), and not a system header.
  bool User() const;
};

// Call sites for the report: "PATH+0xOFFSET" as the preload sends it, read with elfutils'
// libdw (function names demangled, file:line where the module has line tables, and out of
// inlined library code to the line that called it). Modules are read once, when first named.
class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer &) = delete;
  Symbolizer &operator=(const Symbolizer &) = delete;
  const SiteFrame &Resolve(const std::string &site);
  // The report's name for a call site: the innermost frame of the user's code among the site
  // and its callers (innermost first) with the library function that allocates; else the
  // Python line its surviving samples came from (`python`, may be null), with that function;
  // else the site.
  std::string Attribute(const std::string &site, const std::vector<std::string> &callers,
                        const WatchRecording::PythonLine *python = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::map<std::string, SiteFrame> frames_;
};

// A call site's stack as growing.folded and the report's flame graph show it: outermost first
// (the Python line, the callers, the site), each frame "FUNCTION FILE:LINE" (file name only) or
// "MODULE+0xOFFSET", with no ';' or newline in it.
std::vector<std::string> FoldedStack(const WatchRecording &recording, std::uint32_t site,
                                     Symbolizer &symbolizer);
// --pprof (pprof.cc): (file name, contents) of first.pb.gz and last.pb.gz (the call sites'
// survivors at the trace's first and last measured block ends, gzipped profile.proto) and
// growing.folded (collapsed stacks of what grew between them); empty when the trace has no
// measured blocks.
std::vector<std::pair<std::string, std::string>> Profiles(const WatchRecording &recording,
                                                          const harness::Trace &trace,
                                                          Symbolizer &symbolizer);

}  // namespace leakbound::watch::detail
