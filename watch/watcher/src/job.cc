// `leakbound watch` end to end: record the job, give each process image its own Trace and
// workload (named by role), judge those that sent enough samples and summarise the others, and
// write the reports; the job's verdict is the worst of its judged processes (docs/watch.md,
// "Process trees", "Exit codes").
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <system_error>
#include <unordered_map>

#include "leakbound/harness/judge.h"
#include "leakbound/harness/suite.h"
#include "leakbound/reports/format.h"
#include "leakbound/reports/html.h"
#include "leakbound/reports/json.h"
#include "leakbound/reports/junit.h"
#include "leakbound/reports/markdown.h"
#include "internal.h"
#include "leakbound/watch/watcher.h"

namespace leakbound::watch {
namespace {

namespace fs = std::filesystem;
using harness::Judge;
using harness::OutstandingRow;
using harness::OutstandingSnapshot;
using harness::PrintSummary;
using harness::Trace;
using harness::TraceCounter;
using harness::TraceFile;

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

std::string Notes(const WatchRecording &r) {
  std::string notes;
  for (const std::string &n : r.notes) notes += "; " + n;
  // The end report (BYE) if it came, else the last sample.
  const leakbound_watch_counters &last =
      r.at_exit ? *r.at_exit : r.samples.empty() ? r.at_start : r.samples.back().counters;
  if (last.untracked_allocations > 0) {
    notes += "; " + std::to_string(last.untracked_allocations) +
             " allocations could not be recorded (the heap's record tables were full or could "
             "not be mapped): their bytes are not in host.heap_bytes";
  }
  if (r.sites_dropped > 0) {
    notes += "; " + std::to_string(r.sites_dropped) +
             " allocations were made at call sites past the site table's room (counted "
             "exactly in the heap's counters, and together in the row '[call sites past the "
             "table]', named by the stack most of its surviving samples came from)";
  }
  if (r.mapped_dropped > 0) {
    notes += "; " + std::to_string(r.mapped_dropped) +
             " anonymous mappings or unmappings were not booked (past the mapping table's room, "
             "or by a signal handler inside it): host.mapped_bytes is off by their bytes";
  }
  if (r.malformed_records > 0) {
    notes += "; " + std::to_string(r.malformed_records) + " malformed channel records dropped";
  }
  return notes;
}

// One process image of the job as the report shows it.
struct Subject {
  const WatchImage *image = nullptr;
  std::string role;
  Trace trace;
  bool judged = false;
  // Each attributed call site's stack (FoldedStack), by the name the report gives it.
  std::map<std::string, std::vector<std::string>> stacks;
};

std::string Shortened(std::string text, size_t most) {
  if (text.size() <= most) return text;
  size_t cut = most;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

// The image of the job that started image i, or job.images.size(). The parent the process said
// (getppid when its preload started: before a daemon's reparenting) when that is a process of the
// job, else the one /proc gave when watch accepted its connection: in a pid namespace of its own,
// getppid() is 0 for its first process and in-namespace numbers for the others, which may be the
// pid of another process of the job (the process's own pid, as it says it, then differs from the
// one the kernel gives watch: its own word is not used).
size_t ParentImage(const WatchJob &job, size_t i, std::uint64_t pid) {
  size_t parent = job.images.size();
  for (size_t k = 0; k < job.images.size(); ++k) {
    if (k != i && job.images[k].pid == pid && !job.images[k].recording.replaced_by_exec) {
      parent = k;
    }
  }
  return parent;
}

std::uint64_t ParentPid(const WatchJob &job, size_t i) {
  const WatchImage &image = job.images[i];
  const std::uint64_t said = image.recording.parent_pid;
  const bool nested = image.recording.own_pid != 0 && image.recording.own_pid != image.pid;
  if (nested && image.parent_pid != 0) return image.parent_pid;
  if (said != 0 && ParentImage(job, i, said) < job.images.size()) return said;
  if (image.parent_pid != 0 && ParentImage(job, i, image.parent_pid) < job.images.size()) {
    return image.parent_pid;
  }
  return said != 0 ? said : image.parent_pid;
}

// What an image is in the job: what it says (a DataLoader worker, a spawned rank), else its
// RANK, else how it began (docs/watch.md, "Process trees").
std::string RoleOf(const WatchJob &job, size_t i, int depth = 0) {
  const WatchImage &image = job.images[i];
  const WatchRecording &r = image.recording;
  if (!r.role.empty()) return r.role;
  const std::uint64_t parent_pid = ParentPid(job, i);
  const size_t parent = ParentImage(job, i, parent_pid);
  const bool has_parent = parent < job.images.size();
  if (!image.rank.empty() && (!has_parent || job.images[parent].rank != image.rank)) {
    return "rank " + image.rank;
  }
  if (image.root) return "main";
  const std::string parent_name =
      !has_parent ? "pid " + std::to_string(parent_pid)
      : job.images[parent].root || depth > 4 ? job.images[parent].comm
                                             : RoleOf(job, parent, depth + 1);
  if (r.origin == LEAKBOUND_WATCH_ORIGIN_FORK) {
    return "fork " + std::to_string(r.fork_index) + " of " + parent_name;
  }
  return image.comm + ", child of " + parent_name;
}

std::string CommandOf(const WatchImage &image) {
  return image.command_line.empty() ? image.comm : image.command_line;
}

// Each image's workload name: "NAME / ROLE"; images that share a role (siblings started alike,
// `bash -c './a clean & ./a leak'`) are told apart by " #2", " #3", ... in the order of their
// command lines, then of their arrival, so that a process keeps its name from run to run (diff
// matches workloads by name: by role and command line, not by pid or by which sibling connected
// first). The root keeps NAME.
std::vector<std::string> SubjectNames(const WatchJob &job, const std::string &name) {
  std::vector<std::string> names(job.images.size(), name);
  std::map<std::string, std::vector<size_t>> by_name;
  for (size_t i = 0; i < job.images.size(); ++i) {
    if (job.images[i].root) continue;
    names[i] = name + " / " + RoleOf(job, i);
    by_name[names[i]].push_back(i);
  }
  for (auto &[shared, images] : by_name) {
    std::stable_sort(images.begin(), images.end(), [&](size_t a, size_t b) {
      return CommandOf(job.images[a]) < CommandOf(job.images[b]);
    });
    for (size_t k = 1; k < images.size(); ++k) {
      names[images[k]] = shared + " #" + std::to_string(k + 1);
    }
  }
  return names;
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

// A file made by `make` (a reports::PendingFile: written under its temporary name and fsync'd)
// on a thread of its own, so that its text and the disk's waits overlap the work after it; made
// here where no thread can be started (a pids limit). What `make` refers to must outlive the
// future (whose destructor waits for it).
template <typename Make>
std::future<reports::PendingFile> MadeBehind(Make make) {
  try {
    return std::async(std::launch::async, make);
  } catch (const std::system_error &) {
    std::promise<reports::PendingFile> made;
    made.set_value(make());
    return made.get_future();
  }
}

// A report of `text` written behind (MadeBehind); path and text must outlive the future.
std::future<reports::PendingFile> WriteBehind(const fs::path &path, const std::string &text) {
  return MadeBehind([&path, &text] { return reports::PendingFile(path, text); });
}

// Worst first: a leak, a failure, inconclusive, bounded.
int JobSeverity(const reports::VerdictClass &verdict) {
  if (reports::IsMemoryFinding(verdict)) return 3;
  if (verdict == reports::kError) return 2;
  if (verdict == reports::kInconclusive) return 1;
  return 0;
}

}  // namespace

int RunWatch(const WatchOptions &options) {
  // The watcher's memory: kept for reuse, never handed back. Its samples only grow while the
  // program runs, and after it ends the trace and the reports are built and written one after
  // another, each in memory the last one freed; with glibc's defaults every large buffer was a
  // mapping of its own and the heap's top was trimmed at each free, so each was faulted in anew
  // (a 20,000-step trace: a quarter of the watcher's time after the program ended). 32 MiB is
  // the largest mmap threshold every glibc accepts (up to 2.34 it refuses more, and the trim
  // setting would then pin the threshold at its 128 KiB default); the trim threshold is set only
  // when the first one took.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1) mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const WatchPaths paths = FindWatchPaths();
  ReportFolder folder(options.out);
  const WatchJob job = RecordProgram(options, paths);
  const WatchRecording &root = job.Root();

  // Every image's trace; an image is judged when enough samples arrived, the others are
  // summarised (a compiler, `sh -c`, a process that ended early). With none judged, the root's
  // trace carries the verdict (inconclusive, saying what it needs).
  std::vector<Subject> subjects;
  detail::Symbolizer symbolizer;  // call sites named once, for every process
  const std::vector<std::string> names = SubjectNames(job, options.name);
  for (size_t i = 0; i < job.images.size(); ++i) {
    const WatchImage &image = job.images[i];
    Subject subject;
    subject.image = &image;
    subject.role = RoleOf(job, i);
    WatchOptions own = options;
    if (!image.root) {
      own.name = names[i];
      own.command = {CommandOf(image)};
    }
    subject.trace = BuildWatchTrace(image.recording, own);
    // Each call site by the innermost line of the user's code among it and its callers.
    std::map<std::string, const std::vector<std::string> *> callers;
    for (const auto &[site, frames] : image.recording.site_frames) {
      const auto name = image.recording.site_names.find(site);
      if (name != image.recording.site_names.end()) callers[name->second] = &frames;
    }
    std::map<std::string, const WatchRecording::PythonLine *> python;
    for (const auto &[site, line] : image.recording.site_python) {
      const auto name = image.recording.site_names.find(site);
      if (name != image.recording.site_names.end()) python[name->second] = &line;
    }
    // The site of each row's name (the first site of that name): only the rows' names are
    // looked for (a map of all ~15,000 names of a PyTorch process was ~8 ms of the exit).
    std::unordered_map<std::string, std::optional<std::uint32_t>> site_of;
    for (const OutstandingSnapshot &snapshot : subject.trace.outstanding) {
      for (const OutstandingRow &row : snapshot.rows) site_of.emplace(row.op, std::nullopt);
    }
    for (const auto &[site, name] : image.recording.site_names) {
      if (const auto it = site_of.find(name); it != site_of.end() && !it->second) it->second = site;
    }
    static const std::vector<std::string> kNone;
    for (OutstandingSnapshot &snapshot : subject.trace.outstanding) {
      for (OutstandingRow &row : snapshot.rows) {
        const auto found = callers.find(row.op);
        const auto line = python.find(row.op);
        std::string named =
            symbolizer.Attribute(row.op, found == callers.end() ? kNone : *found->second,
                                 line == python.end() ? nullptr : line->second);
        if (const auto site = site_of.find(row.op);
            site != site_of.end() && site->second && !subject.stacks.contains(named)) {
          subject.stacks.emplace(named, FoldedStack(image.recording, *site->second, symbolizer));
        }
        row.op = std::move(named);
      }
    }
    subject.trace.subject.description +=
        "; pid " + std::to_string(image.pid) + ", parent " +
        std::to_string(ParentPid(job, i)) + ", " + subject.role +
        (image.recording.at_clock ? "; it marks no step of its own: sampled at the job's steps "
                                    "(its first allocation after each)"
                                  : "") +
        Notes(image.recording);
    subject.judged = subject.trace.blocks > 0 && image.verified;
    // Only for a process with pages to share: the note's explanation is theirs being copied.
    if (const std::string note =
            detail::SharesWithRelatives(image.recording) ? PrivateMemoryNote(subject.trace) : "";
        !note.empty()) {
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
    const WatchRecording &r = s.image->recording;
    const leakbound_watch_counters &last =
        r.at_exit ? *r.at_exit : r.samples.empty() ? r.at_start : r.samples.back().counters;
    if (++summarised_count <= 12) {
      summarised += std::string(summarised.empty() ? "" : "; ") + s.role + " (pid " +
                    std::to_string(s.image->pid) + ", `" +
                    Shortened(CommandOf(*s.image), 80) +
                    "`, " + std::to_string(r.samples.size()) + " samples, heap at its end " +
                    reports::FormatBytes(static_cast<double>(last.heap_bytes)) + ", " +
                    r.Ending() + ")";
    }
  }
  if (summarised_count > 12) summarised += "; and " + std::to_string(summarised_count - 12) + " more";

  reports::Report report;
  report.meta = harness::CurrentMetadata(harness::RunOptions{});
  report.meta.device = "host (watched program)";
  report.meta.seed.reset();
  report.meta.blas_threads.reset();
  report.meta.blocks = options.blocks;
  report.meta.warmup_steps = options.warmup_steps;
  report.meta.wall_seconds = job.wall_seconds;
  report.meta.interrupted = root.Interruption() != 0;
  TraceFile traces;
  std::vector<Subject *> reported;  // the judged subjects (or the root's, when none is)
  for (Subject &s : subjects) {
    if (!(s.judged || (!any_judged && s.image->root))) continue;
    if (reported.empty()) {
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
    reported.push_back(&s);
    // Moved, not copied (a 20,000-step trace's series are ~2 MB): judged from here on, read by
    // the trace file's thread and the judging at once, changed by neither.
    traces.traces.push_back(std::move(s.trace));
  }
  traces.meta = report.meta;
  // trace.json is made beside the judging and report.json: its text and its fsync were the
  // largest part of the watcher's time after the program ended (a 20,000-step trace: ~9 of ~25
  // ms), and the program's cores are free by then. Both are written under temporary names first
  // and put in place in the order they always were, trace.json first, so that a run's
  // report.json is never beside another run's trace.json (a failure while either is made leaves
  // both as they were). Where no thread can be started (a pids limit), trace.json is made on
  // this one.
  const auto make_trace = [&traces, &options] {
    return reports::PendingFile(options.out / "trace.json", TraceFileToJson(traces));
  };
  std::future<reports::PendingFile> trace_made = MadeBehind(make_trace);
  const WatchImage *worst = nullptr;
  int worst_severity = -1;
  for (size_t k = 0; k < reported.size(); ++k) {
    Subject &s = *reported[k];
    reports::WorkloadResult result = Judge(traces.traces[k]);
    for (reports::Attribution &row : result.attribution) {
      if (const auto stack = s.stacks.find(row.op); stack != s.stacks.end()) row.stack = stack->second;
    }
    const WatchRecording &r = s.image->recording;
    if (r.Failed() && result.evidence.find(r.Ending()) == std::string::npos) {
      result.evidence += " (the program " + r.Ending() + ")";
    }
    if (JobSeverity(result.verdict) > worst_severity) {
      worst_severity = JobSeverity(result.verdict);
      worst = s.image;
    }
    report.workloads.push_back(std::move(result));
  }
  // --pprof: each judged process's call sites (docs/watch.md, "Profiles"); a folder per process
  // when more than one was judged.
  if (!options.pprof.empty()) {
    const size_t judged = report.workloads.size();
    for (size_t k = 0; k < traces.traces.size(); ++k) {
      const Subject *s = reported[k];
      fs::path dir = options.pprof;
      if (judged > 1) {
        std::string name = traces.traces[k].subject.name;
        for (char &c : name) {
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
        }
        dir /= name;
      }
      fs::create_directories(dir);
      for (const auto &[file, contents] :
           detail::Profiles(s->image->recording, traces.traces[k], symbolizer)) {
        reports::WriteFileAtomically(dir / file, contents);
      }
    }
  }
  // The other reports are made while trace.json is (it is the longest: ~5 ms of a 20,000-step
  // run; report.json and report.html ~2 ms each): report.json wholly on a thread of its own, the
  // others here, each written behind the making of the next; all are put in place after
  // trace.json in the order they always were. The report is not changed from here on.
  const fs::path report_path = options.out / "report.json";
  const fs::path markdown_path = options.out / "report.md";
  const fs::path html_path = options.out / "report.html";
  std::future<reports::PendingFile> report_written = MadeBehind([&report_path, &report] {
    return reports::PendingFile(report_path, reports::ReportToText(report));
  });
  const std::string markdown_text = reports::RenderMarkdown(report);
  std::future<reports::PendingFile> markdown_written = WriteBehind(markdown_path, markdown_text);
  const std::string html_text = reports::RenderHtml(report);
  std::future<reports::PendingFile> html_written = WriteBehind(html_path, html_text);
  std::string junit_text;
  std::future<reports::PendingFile> junit_written;
  if (!options.junit.empty()) {
    junit_text = reports::RenderJunit(report);
    junit_written = WriteBehind(options.junit, junit_text);
  }
  reports::PendingFile trace_file = trace_made.get();
  reports::PendingFile report_file = report_written.get();
  reports::PendingFile markdown_file = markdown_written.get();
  reports::PendingFile html_file = html_written.get();
  std::vector<reports::PendingFile *> files = {&trace_file, &report_file, &markdown_file,
                                               &html_file};
  std::optional<reports::PendingFile> junit_file;
  if (junit_written.valid()) files.push_back(&junit_file.emplace(junit_written.get()));
  reports::CommitInOrder(files);
  // watch's own report goes to stderr, so that the program's stdout stays its own, byte for byte
  // (`watch -- prog > out.txt`, `watch -- prog | tool`), as time(1) and valgrind do; until
  // 2026-12-08 it followed the program's output on stdout. The CI annotations too: GitHub
  // Actions reads workflow commands from a step's stderr as from its stdout.
  std::ostream &console = std::cerr;
  PrintSummary(report, console);
  // On GitHub Actions, an annotation on the line of each leak (docs/watch.md, "CI").
  if (const char *actions = std::getenv("GITHUB_ACTIONS"); actions && std::string(actions) == "true") {
    const char *workspace = std::getenv("GITHUB_WORKSPACE");
    for (const std::string &line : reports::GithubAnnotations(report, workspace ? workspace : "")) {
      console << line << "\n";
    }
  }

  // The job's verdict: the worst of its judged processes, named.
  reports::VerdictClass verdict = reports::kInconclusive;
  for (size_t i = 0; i < report.workloads.size(); ++i) {
    if (JobSeverity(report.workloads[i].verdict) == worst_severity) {
      verdict = report.workloads[i].verdict;
      if (report.workloads.size() > 1 || !worst->root) {
        console << "\njob: " << verdict << " in " << report.workloads[i].name << " (pid "
                << worst->pid << "): " << Shortened(report.workloads[i].evidence, 300) << "\n";
      } else if (verdict != reports::kPass) {
        // One process: its verdict is in the table above; why (what a verdict needs, the
        // census's survivors, a crash) is said here too, not only in report.md.
        console << "\n" << verdict << ": " << Shortened(report.workloads[i].evidence, 300)
                << "\n";
      }
      break;
    }
  }
  // A process of the job that crashed (killed by a signal watch did not forward) fails the job
  // even when it was too short to be judged.
  int crashed = 0;
  for (const WatchImage &image : job.images) {
    const WatchRecording &r = image.recording;
    if (image.root || !r.status_known || r.term_signal == 0) continue;
    if (r.term_signal < 64 && (r.forwarded_mask & (1ull << r.term_signal))) continue;
    ++crashed;
    console << "\nprocess of the job " << RoleOf(job, static_cast<size_t>(&image - job.images.data()))
            << " (pid " << image.pid << ") " << r.Ending();
  }
  for (const std::string &missing : job.not_observed) console << "\nnot observed: " << missing;
  console << "\nprogram: " << root.Ending();
  if (job.root_peak_rss_kib > 0) {
    char rss[48];
    std::snprintf(rss, sizeof rss, ", peak RSS %.1f MiB", job.root_peak_rss_kib / 1024.0);
    console << rss;
  }
  console << ", " << job.images.size()
            << " process image(s) observed, " << report.workloads.size() << " judged"
            << "\nreports: " << (options.out / "report.json").string()
            << ", report.md, report.html, trace.json\n";

  // Precedence (docs/watch.md, "Exit codes"): an interruption, then a leak in any judged process
  // (whatever the program's own status: the status is in the report), then the program's
  // failure, then inconclusive.
  if (const int s = root.Interruption(); s != 0) return 128 + s;
  if (reports::IsMemoryFinding(verdict)) return kExitLeak;
  if (root.Failed() || crashed > 0 || verdict == reports::kError) return kExitProgramFailed;
  if (verdict == reports::kInconclusive) return kExitInconclusive;
  return kExitOk;
}

}  // namespace leakbound::watch
