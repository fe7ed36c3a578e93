// `leakbound watch [options] -- CMD [ARGS...]`: holds the leak bound on a
// program leakbound did not write. Parses the command line, runs the program
// under the preload (watch_child.cc), fits a schedule to the steps that arrived
// (watch_trace.cc), judges the Trace with the same Judge as `run` and writes
// report.json/.md/.html atomically. docs/watch.md.
#include "leakbound/harness/watch_command.h"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string_view>

#include "leakbound/harness/judge.h"
#include "leakbound/harness/suite.h"
#include "leakbound/reports/format.h"
#include "leakbound/reports/html.h"
#include "leakbound/reports/json.h"
#include "leakbound/reports/markdown.h"
#include "watch_session.h"

// The watch sources are compiled as part of this file until
// harness/CMakeLists.txt lists them.
#include "watch_child.cc"  // NOLINT(bugprone-suspicious-include)
#include "watch_trace.cc"  // NOLINT(bugprone-suspicious-include)

namespace leakbound::harness {
namespace {

namespace fs = std::filesystem;
using watch::WatchOptions;
using watch::WatchUsageError;

constexpr int kOk = 0;
constexpr int kLeak = 1;
constexpr int kUsage = 2;
constexpr int kInternal = 3;
constexpr int kInconclusive = 4;
constexpr int kProgramFailed = 5;

constexpr const char *kExamples = R"(Examples:
  leakbound watch -- ./my_loop 1000          # C/C++: the program calls leakbound_step()
                                             #   (#include <leakbound/watch/step.h>)
  leakbound watch --step-on torch.optim.Optimizer.step -- python3 train.py
                                             # PyTorch, unchanged: a step per optimizer step
  leakbound watch -- python3 train.py        # the script calls leakbound.step()
  leakbound watch --step-range train_step -- ./app   # each end of an NVTX range "train_step"
  leakbound watch --interval 20ms -- ./server        # no steps: sample every 20 ms
  leakbound watch --cuda --step-on torch.optim.SGD.step -- python3 train.py
                                             # also the CUPTI ledger and torch.cuda counters
Exit codes: 0 memory stayed bounded; 1 a leak (see report.md), also when the program then
exited non-zero (its status is in the report); 2 usage error (nothing written); 3 internal
error; 4 inconclusive (the report says what it needs); 5 the program failed (crashed, was
killed or exited non-zero) and no leak was found; 128+N the run was interrupted by signal N
(130: SIGINT, Ctrl-C; 143: SIGTERM; forwarded to the program; the partial report is written).
Watch forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT, every time one arrives.)";

std::uint64_t ParseDuration(const std::string &text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  if (unit == "ns") scale = 1;
  if (unit == "us") scale = 1e3;
  if (unit == "ms") scale = 1e6;
  if (unit == "s") scale = 1e9;
  if (used == 0 || scale == 0 || !(value > 0) || value * scale < 1e5 || value * scale > 3.6e12) {
    throw WatchUsageError(
        "--interval must be a duration from 100us to 1h with a unit (ns, us, "
        "ms, s), e.g. 20ms; got '" +
        text + "'");
  }
  return static_cast<std::uint64_t>(value * scale);
}

struct Parsed {
  WatchOptions options;
  bool help_only = false;
};

Parsed Parse(int argc, char **argv) {
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      split = i;
      break;
    }
  }
  Parsed parsed;
  WatchOptions &o = parsed.options;
  std::string interval, warmup = "auto";
  CLI::App app(
      "leakbound watch: is memory bounded across the steps of a "
      "program leakbound did "
      "not write? Runs CMD under the exact heap interposer, samples "
      "its counters at each "
      "step, judges them like `leakbound run` and writes "
      "report.json/.md/.html.",
      "leakbound watch");
  app.footer(kExamples);
  auto *step_on = app.add_option("--step-on", o.step_on,
                                 "Python callable whose every return is a step, by qualified name "
                                 "(torch.optim.Optimizer.step covers every optimizer subclass)");
  auto *step_range = app.add_option("--step-range", o.step_range,
                                    "NVTX range name: each end of such a range is a step");
  auto *every = app.add_option("--interval", interval,
                               "sample on a timer instead of at steps, e.g. 20ms (units ns, us, "
                               "ms, s)");
  step_on->excludes(step_range)->excludes(every);
  step_range->excludes(every);
  app.add_option("--blocks,-b", o.blocks, "measured blocks (>= 2)")->capture_default_str();
  app.add_option("--warmup,-w", warmup,
                 "warm-up steps, or 'auto' (the first block boundary after "
                 "which the counters "
                 "stop changing; if they never do, the first block)")
      ->capture_default_str();
  app.add_option("--name", o.name, "workload name in the report (default: the program's name)");
  std::string out = "leakbound-watch";
  app.add_option("--out,-o", out, "report folder")->capture_default_str();
  app.add_flag("--keep-pymalloc", o.keep_pymalloc,
               "leave Python's small-object allocator on (by default watch sets "
               "PYTHONMALLOC=malloc so every Python object is counted exactly)");
  app.add_flag("--cuda", o.cuda,
               "expect a device side: report the CUPTI ledger (cupti.*) or why "
               "it is unavailable "
               "even when the program does not look like CUDA (python3 + "
               "torch). The injection "
               "(CUDA_INJECTION64_PATH) is always offered; the driver loads it "
               "only if the "
               "program initialises CUDA");
  bool no_sites = false;
  app.add_flag("--no-call-sites", no_sites,
               "do not record the call site of each allocation (cheaper; no "
               "'where' in the report)");
  try {
    app.parse(split, argv);
  } catch (const CLI::CallForHelp &) {
    std::cout << app.help();
    parsed.help_only = true;
    return parsed;
  } catch (const CLI::ParseError &e) {
    if (split == argc) {
      throw WatchUsageError(std::string(e.what()) +
                            "; no command: put the program after `--`, "
                            "e.g. `leakbound watch -- ./my_loop 1000`");
    }
    throw WatchUsageError(e.what());
  }
  if (split >= argc - 1) {
    throw WatchUsageError(split == argc ? "no command: put the program after `--`, e.g. "
                                          "`leakbound watch -- ./my_loop 1000`"
                                        : "no command after `--`");
  }
  for (int i = split + 1; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.blocks < 2 || o.blocks > 1000) {
    throw WatchUsageError("--blocks must be from 2 to 1000, got " + std::to_string(o.blocks));
  }
  if (warmup != "auto") {
    size_t used = 0;
    try {
      o.warmup_steps = std::stoi(warmup, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used != warmup.size() || o.warmup_steps < 0) {
      throw WatchUsageError("--warmup must be 'auto' or a number of steps >= 0, got '" + warmup +
                            "'");
    }
  }
  if (!interval.empty()) o.interval_ns = ParseDuration(interval);
  if (step_on->count() && o.step_on.find('.') == std::string::npos) {
    throw WatchUsageError(
        "--step-on needs a qualified name module.callable (e.g. "
        "torch.optim.Optimizer.step), got '" +
        o.step_on + "'");
  }
  if (step_range->count() && o.step_range.empty()) {
    throw WatchUsageError("--step-range needs a range name");
  }
  o.call_sites = !no_sites;
  o.out = out;
  if (o.name.empty()) o.name = fs::path(o.command.front()).filename().string();
  return parsed;
}

// Creates the report folder up front (fails before the program runs); a folder
// this command created is removed again if nothing was written into it.
class ReportFolder {
 public:
  explicit ReportFolder(const fs::path &dir) : dir_(dir) {
    std::error_code ec;
    for (fs::path p = fs::absolute(dir); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      created_.push_back(p);
      if (p == p.parent_path()) break;
    }
    fs::create_directories(dir, ec);
    if (ec || ::access(dir.c_str(), W_OK) != 0) {
      Clean();
      throw WatchUsageError("cannot write the report folder " + dir.string() + ": " +
                            (ec ? ec.message() : std::strerror(errno)) + " (pass --out DIR)");
    }
  }
  ~ReportFolder() { Clean(); }

 private:
  void Clean() {
    for (const fs::path &p : created_) {
      std::error_code ec;
      if (!fs::is_directory(p, ec) || !fs::is_empty(p, ec) || ec) return;
      fs::remove(p, ec);
    }
  }
  fs::path dir_;
  std::vector<fs::path> created_;
};

std::string Notes(const watch::WatchRecording &r) {
  std::string notes;
  for (const std::string &n : r.notes) notes += "; " + n;
  // The end report (BYE) if it came, else the last sample.
  const leakbound_watch_counters &last =
      r.at_exit ? *r.at_exit : r.samples.empty() ? r.at_start : r.samples.back().counters;
  if (last.untracked_allocations > 0) {
    notes += "; " + std::to_string(last.untracked_allocations) +
             " allocations could not be recorded (interposer table full)";
  }
  if (r.malformed_records > 0) {
    notes += "; " + std::to_string(r.malformed_records) + " malformed channel records dropped";
  }
  return notes;
}

// One process image of the job as the report shows it.
struct Subject {
  const watch::WatchImage *image = nullptr;
  std::string role;
  Trace trace;
  bool judged = false;
};

std::string Shortened(std::string text, size_t most) {
  if (text.size() <= most) return text;
  size_t cut = most;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

// What an image is in the job: what it says (a DataLoader worker, a spawned rank), else its
// RANK, else how it began (docs/watch.md, "Process trees").
std::string RoleOf(const watch::WatchJob &job, size_t i, int depth = 0) {
  const watch::WatchImage &image = job.images[i];
  const watch::WatchRecording &r = image.recording;
  if (!r.role.empty()) return r.role;
  size_t parent = job.images.size();
  for (size_t k = 0; k < job.images.size(); ++k) {
    if (k != i && job.images[k].pid == r.parent_pid && !job.images[k].recording.replaced_by_exec) {
      parent = k;
    }
  }
  const bool has_parent = parent < job.images.size();
  if (!image.rank.empty() && (!has_parent || job.images[parent].rank != image.rank)) {
    return "rank " + image.rank;
  }
  if (image.root) return "main";
  const std::string parent_name =
      !has_parent ? "pid " + std::to_string(r.parent_pid)
      : job.images[parent].root || depth > 4 ? job.images[parent].comm
                                             : RoleOf(job, parent, depth + 1);
  if (r.origin == LEAKBOUND_WATCH_ORIGIN_FORK) {
    return "fork " + std::to_string(r.fork_index) + " of " + parent_name;
  }
  return image.comm + ", child of " + parent_name;
}

// When private memory (PSS) rose across the judged blocks by more than its own noise while the
// heap did not: a sentence for the report, else empty. Noisy counters are reported, never
// judged: the floor is what the run shows (twice the widest spread within one block around its
// trend, at least 1 MiB).
std::string PrivateMemoryNote(const Trace &trace) {
  if (trace.blocks < 2 || trace.steps_per_block <= 0) return {};
  const TraceCounter *pss = nullptr, *heap = nullptr;
  for (const TraceCounter &c : trace.counters) {
    if (c.name == "process.pss_bytes") pss = &c;
    if (c.name == "host.heap_bytes") heap = &c;
  }
  if (!pss || !heap) return {};
  const auto block = [&](const TraceCounter &c, int b) {
    const auto begin = c.values.begin() + trace.warmup_steps + b * trace.steps_per_block;
    return std::pair(*std::min_element(begin, begin + trace.steps_per_block), 0.0);
  };
  if (pss->values.size() < static_cast<size_t>(trace.warmup_steps + trace.blocks * trace.steps_per_block)) {
    return {};
  }
  // The noise: the widest spread within one block around the line through its ends (a steady
  // rise is not noise).
  double spread = 0;
  for (int b = 0; b < trace.blocks; ++b) {
    const size_t begin = static_cast<size_t>(trace.warmup_steps + b * trace.steps_per_block);
    const size_t n = static_cast<size_t>(trace.steps_per_block);
    const double first = pss->values[begin], last = pss->values[begin + n - 1];
    double low = 0, high = 0;
    for (size_t i = 0; i < n; ++i) {
      const double line = first + (last - first) * double(i) / double(std::max<size_t>(1, n - 1));
      low = std::min(low, pss->values[begin + i] - line);
      high = std::max(high, pss->values[begin + i] - line);
    }
    spread = std::max(spread, high - low);
  }
  const double floor = std::max(double(1 << 20), 2 * spread);
  const double pss_rise = block(*pss, trace.blocks - 1).first - block(*pss, 0).first;
  const double heap_rise = block(*heap, trace.blocks - 1).first - block(*heap, 0).first;
  if (pss_rise <= floor || heap_rise * 10 > pss_rise) return {};
  return "private memory (PSS) rose " + reports::FormatBytes(pss_rise) +
         " from the first to the last judged block (its noise floor in this run: " +
         reports::FormatBytes(floor) + ") while the heap rose " +
         reports::FormatBytes(std::max(0.0, heap_rise)) +
         ": pages it shared with its parent or children being copied (copy-on-write; with "
         "DataLoader workers, copy-on-read of the dataset's Python objects), not a heap leak; "
         "reported, not judged";
}

// Worst first: a leak, a failure, inconclusive, bounded.
int JobSeverity(const reports::VerdictClass &verdict) {
  if (reports::IsMemoryFinding(verdict)) return 3;
  if (verdict == reports::kError) return 2;
  if (verdict == reports::kInconclusive) return 1;
  return 0;
}

int Watch(const WatchOptions &options) {
  const watch::WatchPaths paths = watch::FindWatchPaths();
  ReportFolder folder(options.out);
  const watch::WatchJob job = watch::RecordProgram(options, paths);
  const watch::WatchRecording &root = job.Root();

  // Every image's trace; an image is judged when enough samples arrived, the others are
  // summarised (a compiler, `sh -c`, a process that ended early). With none judged, the root's
  // trace carries the verdict (inconclusive, saying what it needs).
  std::vector<Subject> subjects;
  std::map<std::string, int> names;
  for (size_t i = 0; i < job.images.size(); ++i) {
    const watch::WatchImage &image = job.images[i];
    Subject subject;
    subject.image = &image;
    subject.role = RoleOf(job, i);
    WatchOptions own = options;
    if (!image.root) {
      own.name = options.name + " / " + subject.role;
      if (const int seen = names[own.name]++; seen > 0) own.name += " #" + std::to_string(seen + 1);
      own.command = {image.command_line.empty() ? image.comm : image.command_line};
    }
    subject.trace = watch::BuildWatchTrace(image.recording, own);
    subject.trace.subject.description +=
        "; pid " + std::to_string(image.pid) + ", parent " +
        std::to_string(image.recording.parent_pid) + ", " + subject.role +
        (image.recording.at_clock ? "; it marks no step of its own: sampled at the job's steps "
                                    "(its first allocation after each)"
                                  : "") +
        Notes(image.recording);
    subject.judged = subject.trace.blocks > 0 && image.verified;
    if (const std::string note = PrivateMemoryNote(subject.trace); !note.empty()) {
      subject.trace.subject.description += "; " + note;
    }
    subjects.push_back(std::move(subject));
  }
  const bool any_judged =
      std::any_of(subjects.begin(), subjects.end(), [](const Subject &s) { return s.judged; });
  std::string summarised;
  int summarised_count = 0;
  for (Subject &s : subjects) {
    if (s.judged || (!any_judged && s.image->root)) continue;
    const watch::WatchRecording &r = s.image->recording;
    const leakbound_watch_counters &last =
        r.at_exit ? *r.at_exit : r.samples.empty() ? r.at_start : r.samples.back().counters;
    if (++summarised_count <= 12) {
      summarised += std::string(summarised.empty() ? "" : "; ") + s.role + " (pid " +
                    std::to_string(s.image->pid) + ", `" +
                    Shortened(s.image->command_line.empty() ? s.image->comm : s.image->command_line,
                              80) +
                    "`, " + std::to_string(r.samples.size()) + " samples, heap at its end " +
                    reports::FormatBytes(static_cast<double>(last.heap_bytes)) + ", " +
                    r.Ending() + ")";
    }
  }
  if (summarised_count > 12) summarised += "; and " + std::to_string(summarised_count - 12) + " more";

  reports::Report report;
  report.meta = CurrentMetadata(RunOptions{});
  report.meta.device = "host (watched program)";
  report.meta.seed.reset();
  report.meta.blas_threads.reset();
  report.meta.blocks = options.blocks;
  report.meta.warmup_steps = options.warmup_steps;
  report.meta.wall_seconds = job.wall_seconds;
  report.meta.interrupted = root.Interruption() != 0;
  TraceFile traces;
  const watch::WatchImage *worst = nullptr;
  int worst_severity = -1;
  for (Subject &s : subjects) {
    if (!(s.judged || (!any_judged && s.image->root))) continue;
    if (report.workloads.empty()) {
      if (summarised_count > 0) {
        s.trace.subject.description += "; also in the job, summarised, not judged (too few "
                                       "samples): " + summarised;
      }
      for (const std::string &refusal : job.refused) {
        s.trace.subject.description += "; refused: " + refusal;
      }
      for (const std::string &missing : job.not_observed) {
        s.trace.subject.description += "; not observed: " + missing;
      }
      report.meta.steps_per_block = s.trace.steps_per_block;
    }
    reports::WorkloadResult result = Judge(s.trace);
    const watch::WatchRecording &r = s.image->recording;
    if (r.Failed() && result.evidence.find(r.Ending()) == std::string::npos) {
      result.evidence += " (the program " + r.Ending() + ")";
    }
    if (JobSeverity(result.verdict) > worst_severity) {
      worst_severity = JobSeverity(result.verdict);
      worst = s.image;
    }
    report.workloads.push_back(std::move(result));
    traces.traces.push_back(s.trace);
  }
  traces.meta = report.meta;
  WriteTraceFileAtomically(traces, options.out / "trace.json");
  reports::WriteReportAtomically(report, options.out / "report.json");
  reports::WriteFileAtomically(options.out / "report.md", reports::RenderMarkdown(report));
  reports::WriteFileAtomically(options.out / "report.html", reports::RenderHtml(report));
  PrintSummary(report, std::cout);

  // The job's verdict: the worst of its judged processes, named.
  reports::VerdictClass verdict = reports::kInconclusive;
  for (size_t i = 0; i < report.workloads.size(); ++i) {
    if (JobSeverity(report.workloads[i].verdict) == worst_severity) {
      verdict = report.workloads[i].verdict;
      if (report.workloads.size() > 1 || !worst->root) {
        std::cout << "\njob: " << verdict << " in " << report.workloads[i].name << " (pid "
                  << worst->pid << "): " << Shortened(report.workloads[i].evidence, 300) << "\n";
      }
      break;
    }
  }
  // A process of the job that crashed (killed by a signal watch did not forward) fails the job
  // even when it was too short to be judged.
  int crashed = 0;
  for (const watch::WatchImage &image : job.images) {
    const watch::WatchRecording &r = image.recording;
    if (image.root || !r.status_known || r.term_signal == 0) continue;
    if (r.term_signal < 64 && (r.forwarded_mask & (1ull << r.term_signal))) continue;
    ++crashed;
    std::cout << "\nprocess of the job " << RoleOf(job, static_cast<size_t>(&image - job.images.data()))
              << " (pid " << image.pid << ") " << r.Ending();
  }
  for (const std::string &missing : job.not_observed) std::cout << "\nnot observed: " << missing;
  std::cout << "\nprogram: " << root.Ending() << ", " << job.images.size()
            << " process image(s) observed, " << report.workloads.size() << " judged"
            << "\nreports: " << (options.out / "report.json").string()
            << ", report.md, report.html, trace.json\n";

  // Precedence (docs/watch.md, "Exit codes"): an interruption, then a leak in any judged process
  // (whatever the program's own status: the status is in the report), then the program's
  // failure, then inconclusive.
  if (const int s = root.Interruption(); s != 0) return 128 + s;
  if (reports::IsMemoryFinding(verdict)) return kLeak;
  if (root.Failed() || crashed > 0 || verdict == reports::kError) return kProgramFailed;
  if (verdict == reports::kInconclusive) return kInconclusive;
  return kOk;
}

}  // namespace

int WatchMain(int argc, char **argv) {
  try {
    const Parsed parsed = Parse(argc, argv);
    if (parsed.help_only) return kOk;
    return Watch(parsed.options);
  } catch (const WatchUsageError &e) {
    std::cerr << "leakbound watch: " << e.what() << "\n(see `leakbound watch --help`)\n";
    return kUsage;
  } catch (const std::exception &e) {
    std::cerr << "leakbound watch: internal error: " << e.what()
              << "\nplease report it with the command line\n";
    return kInternal;
  }
}

}  // namespace leakbound::harness
