// The watcher: the parent side of `leakbound watch` (docs/watch.md). RecordProgram runs a
// command and every process it starts under the preload and receives their records
// (src/record.cc, with environment.cc, receive.cc, job_proc.cc); BuildWatchTrace turns one
// process's records into a Trace (src/trace.cc); RunWatch does both, judges each process and
// writes the reports (src/job.cc). The CLI (harness/src/watch_command.cc) only parses options.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <stdexcept>
#include <csignal>
#include <string>
#include <vector>

#include "leakbound/harness/trace.h"
#include "leakbound/watch/channel.h"

namespace leakbound::watch {

using harness::Trace;

// A command line that cannot be run as given (exit 2, nothing written).
struct WatchUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct WatchOptions {
  std::string step_on;            // Python qualname, or empty
  std::string step_range;         // NVTX range name, or empty
  std::uint64_t interval_ns = 0;  // timer sampling, or 0
  int blocks = 3;
  int warmup_steps = -1;  // -1: detect
  std::string name;
  std::filesystem::path out;
  std::filesystem::path junit;  // --junit: JUnit XML of the job's processes, or empty
  std::filesystem::path pprof;  // --pprof: profiles of the judged processes' call sites, or empty
  bool keep_pymalloc = false;
  bool call_sites = true;
  bool python_lines = true;  // --no-python-lines: LEAKBOUND_PYTHON_LINES=0 for the program
  bool cuda = false;  // --cuda: expect a device side even if the program does
                      // not look like CUDA
  std::vector<std::string> command;
};

// Where the pieces `watch` injects live (found next to the leakbound
// executable, or named by LEAKBOUND_PRELOAD / LEAKBOUND_WATCH_PYTHON /
// LEAKBOUND_NVTX_INJECTION / LEAKBOUND_CUDA_INJECTION).
struct WatchPaths {
  std::filesystem::path preload;
  std::filesystem::path python;  // holds leakbound/ and sitecustomize/
  std::filesystem::path nvtx_injection;
  std::filesystem::path cuda_injection;  // libleakbound_inject.so (CUDA_INJECTION64_PATH)
};
WatchPaths FindWatchPaths();

// One sample (a STEP or TICK record).
struct WatchSample {
  std::uint64_t seq = 0;
  std::uint64_t time_ns = 0;
  leakbound_watch_counters counters{};
  bool has_device = false;  // a DEVICE record preceded this sample
  // RSS and PSS of the process (/proc/PID/smaps_rollup), read by watch when this sample arrived
  // (at most every kPrivateMemoryEveryNs per process); noisy counters, never judged.
  bool has_private = false;
  bool has_census = false;  // a census was taken after this sample (detail->census)
  std::uint64_t rss_bytes = 0;
  std::uint64_t pss_bytes = 0;
  // The censuses of call sites taken with a census (SITE_CENSUS): per site, the first cohort it
  // books and its non-empty cohorts from there (cohort index -> bytes, blocks).
  struct SiteCensus {
    std::uint32_t first = 0;
    std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> cohorts;
  };
  // What only some samples carry, kept apart so that a sample without any is 104 bytes: inline it
  // was 328, and a 20,000-step run's samples were two thirds of the watcher's page faults (its
  // vector's growth) and ~13 MB of its memory.
  struct Detail {
    std::array<std::uint64_t, LEAKBOUND_WATCH_VALUES> device{};  // has_device
    std::map<std::string, std::uint64_t> framework;  // COUNTER records ("torch.allocated_bytes")
    // The census (CENSUS batches): cohort index -> (bytes, blocks) of the non-empty cohorts.
    // Cohort 0 began at process start, cohort c + 1 right after the sample of the c-th census.
    std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> census;
    std::map<std::uint32_t, SiteCensus> site_census;
  };
  std::unique_ptr<Detail> detail;  // null: none of them

  Detail &MakeDetail() {
    if (!detail) detail = std::make_unique<Detail>();
    return *detail;
  }
  // The detail, or an empty one.
  const Detail &DetailOrNone() const {
    static const Detail kNone;
    return detail ? *detail : kNone;
  }
};

struct SiteUpdate {
  std::size_t before_sample = 0;  // applies from this sample index on
  std::uint32_t site = 0;
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
};

// Everything the program sent, and how it ended.
struct WatchRecording {
  bool hello = false;
  int origin = 0;            // HELLO: LEAKBOUND_WATCH_ORIGIN_EXEC / _FORK
  std::uint64_t own_pid = 0;     // getpid() as the process said it in HELLO (its namespace's)
  std::uint64_t parent_pid = 0;
  std::uint64_t fork_index = 0;  // a fork's ordinal among its parent's forks (1-based)
  std::uint64_t exe_dev = 0, exe_ino = 0;  // its executable (HELLO)
  std::string role;          // ROLE: what the process says it is ("DataLoader worker 1")
  bool at_clock = false;     // its samples are at the job's clock (it marks no step of its own)
  std::uint64_t restarts = 0;  // HELLOs after the first: the series started again
  std::string heap_state =
      "unavailable: the preload never started in the program (is it a "
      "static executable, or setuid?)";
  leakbound_watch_counters at_start{};
  std::optional<leakbound_watch_counters> at_exit;  // BYE
  std::uint64_t forks = 0;  // forks of the followed process (FORK records, BYE)
  std::vector<WatchSample> samples;
  std::vector<SiteUpdate> site_updates;
  std::set<std::uint32_t> mapping_sites;  // sites whose allocations are anonymous mappings
  std::set<std::uint32_t> device_sites;   // sites whose allocations are device memory (cudaMalloc)
  std::map<std::uint32_t, std::string> site_names;
  // FRAME records: a site's callers (innermost first), for the sites that kept growing.
  std::map<std::uint32_t, std::vector<std::string>> site_frames;
  // PYTHON records: the Python line a site's surviving samples were allocated under.
  struct PythonLine {
    std::string where;  // "FILE:LINE in FUNCTION"
    std::uint64_t live_here = 0, live = 0, taken = 0;
  };
  std::map<std::uint32_t, PythonLine> site_python;
  std::vector<std::string> notes;
  std::map<std::string, std::string> probe_states;  // PROBE records: "cupti" -> "active", ...
  // The device side: expected when the program looks like CUDA or with --cuda;
  // when no injection reported, `device_absent_reason` says why (CUPTI's words
  // where it has them).
  bool device_expected = false;
  std::string device_absent_reason;
  std::uint64_t malformed_records = 0;
  std::uint64_t sites_dropped = 0;  // allocations at call sites the site table had no room for
  std::uint64_t mapped_dropped = 0;  // anonymous mappings not in host.mapped_bytes
  // While receiving: DEVICE / COUNTER values waiting for their STEP, a PROBE
  // state in pieces.
  WatchSample pending;
  std::string probe_piece;
  // How the program ended.
  bool exited = false;
  int exit_status = 0;
  int term_signal = 0;       // killed by this signal (0: exited)
  int forwarded_signal = 0;         // the first signal watch received and forwarded (SIGINT, ...)
  std::uint64_t forwarded_mask = 0;  // bit N: watch forwarded signal N at least once
  double wall_seconds = 0;
  bool replaced_by_exec = false;  // the process exec'd a new program image after this one
  bool still_running = false;     // connected when a signal stopped watch's wait for the job
  bool expect_bye = true;         // the root: its end report is expected (a child may _exit)
  std::uint64_t clock_moves = 0;  // STEP and timer TICK records received (kept across HELLOs)
  std::uint64_t messages = 0;     // messages read from the connection, malformed ones included
  bool status_known = true;  // false: a process of the job whose parent, not watch, reaped it
  std::string Ending() const;  // "exited with status 0", "killed by SIGSEGV", ...
  bool Failed() const { return term_signal != 0 || (exited && exit_status != 0); }
  // The program ended normally but its end report (BYE) never came: it ended with _exit, or the
  // channel was closed behind the preload's hooks (a raw close_range / dup2 system call).
  bool ChannelLost() const { return hello && !at_exit && exited && expect_bye; }
  // The signal that interrupted the run, 0: none. The one that ended the program if watch had
  // forwarded it, or if it is SIGINT / SIGQUIT (Ctrl-C / Ctrl-\ on the terminal go to the
  // program's foreground group, not to watch); else the first one watch forwarded.
  int Interruption() const {
    if (term_signal > 0 && term_signal < 64 && (forwarded_mask & (1ull << term_signal))) {
      return term_signal;
    }
    if (term_signal == SIGINT || term_signal == SIGQUIT) return term_signal;
    return forwarded_signal;
  }
};

// One process image of the job: a connection to the watcher (docs/watch.md, "Process trees").
struct WatchImage {
  std::uint64_t pid = 0;
  std::uint64_t parent_pid = 0;  // in watch's pid namespace (/proc, when watch accepted it); 0: gone
  std::string command_line;  // /proc/PID/cmdline when it connected (a fork's is its parent's)
  std::string comm;          // /proc/PID/comm
  std::string rank;          // RANK in /proc/PID/environ, if set
  bool root = false;         // the process watch started (any of its images)
  bool verified = true;      // false: it had ended before watch could check it was in the job
  WatchRecording recording;
};

// Everything the job sent: every image that connected, in the order they connected, and the
// connections refused (a process outside the job, or one that was gone before it was checked).
struct WatchJob {
  std::vector<WatchImage> images;
  std::vector<std::string> refused;
  // Processes of the job seen on /proc that never connected, with the reason ("a static
  // executable", "a setuid program", "its environment does not carry LD_PRELOAD").
  std::vector<std::string> not_observed;
  std::uint64_t root_pid = 0;
  double wall_seconds = 0;
  // The first process's peak resident set (ru_maxrss from wait4, KiB): the program's own, and that
  // of any process it waited for; 0 when unknown. Not the watcher's, which `time leakbound watch`
  // or a parent's wait4 would report when it is the larger (a small C program).
  std::int64_t root_peak_rss_kib = 0;
  // The root process's ending (exit status, interruption), whichever image it ended in.
  const WatchRecording &Root() const;
};

// Runs options.command under the preload, with every process it starts, and collects their
// records until the last of them has ended. Throws WatchUsageError when the command cannot be
// started (not found, not executable).
WatchJob RecordProgram(const WatchOptions &options, const WatchPaths &paths);

// The Trace of a recording (subject kind "watched"): warm-up detected or as
// configured, the rest split into options.blocks blocks; ended_early / error
// set when too few steps arrived or the program crashed. Pure.
Trace BuildWatchTrace(const WatchRecording &recording, const WatchOptions &options);

// Fewest samples a judgement needs: one warm-up block and `blocks` blocks of
// kMinStepsPerBlock.
inline constexpr int kMinStepsPerBlock = 4;
inline int MinimumSamples(int blocks) { return (blocks + 1) * kMinStepsPerBlock; }

// The exit codes of `leakbound watch` (docs/watch.md, "Exit codes"); an interrupted run exits
// 128 + the signal.
inline constexpr int kExitOk = 0;
inline constexpr int kExitLeak = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInternal = 3;
inline constexpr int kExitInconclusive = 4;
inline constexpr int kExitProgramFailed = 5;

// Records options.command with RecordProgram, judges every process image that sent enough
// samples (the others are summarised), prints the summary and the job's verdict on stdout and
// writes report.json/.md/.html and trace.json into options.out. Returns the exit code. Throws
// WatchUsageError before anything runs when the command or the report folder is unusable.
int RunWatch(const WatchOptions &options);

}  // namespace leakbound::watch
