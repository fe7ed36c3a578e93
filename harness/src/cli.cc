// The `leakbound` command line: list, run, diff, check, render, judge.
// Exit codes: 0 every expectation met / no regression; 1 a leak where none was expected, a
// missed zoo entry, or a regression past tolerance; 2 usage or input errors (nothing written);
// 3 an internal error; 128 + signal (130 SIGINT, 143 SIGTERM) when `run` or `check` was
// interrupted: the workloads that finished are written, in a report marked interrupted.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "leakbound/harness/device_probes.h"
#include "leakbound/harness/judge.h"
#include "leakbound/harness/suite.h"
#include "leakbound/harness/trace.h"
#include "leakbound/harness/watch_command.h"
#include "leakbound/reports/diff.h"
#include "leakbound/reports/html.h"
#include "leakbound/reports/json.h"
#include "leakbound/reports/junit.h"
#include "leakbound/reports/markdown.h"
#include "leakbound/runtime/backend.h"
#include "leakbound/runtime/errors.h"

namespace fs = std::filesystem;
namespace lb = leakbound;

namespace {

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;
constexpr int kInternal = 3;  // a bug in leakbound: please report it
// `judge` of a watch trace exits as `watch` did (leakbound/watch/watcher.h's kExit*).
constexpr int kWatchInconclusive = 4;
constexpr int kWatchProgramFailed = 5;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The signal that asked a run to stop (0: none). The handler only stores it; the suite polls it
// between steps (SuiteOptions::stop) and the command writes what finished.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free atomic");

extern "C" void StoreStopSignal(int signal_number) { g_stop_signal.store(signal_number); }

// SIGINT and SIGTERM stop the run gracefully. SA_RESETHAND: a second signal, while the finished
// workloads are being written, ends the process the default way.
void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = StoreStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (int signal_number : {SIGINT, SIGTERM}) {
    if (::sigaction(signal_number, &action, nullptr) != 0) {
      throw std::runtime_error("cannot install the handler for signal " +
                               std::to_string(signal_number) + ": " + std::strerror(errno));
    }
  }
}

// 130 for SIGINT, 143 for SIGTERM: the shell's convention for "ended by signal N".
int InterruptedExitCode() { return 128 + g_stop_signal.load(); }

std::string SignalName(int signal_number) {
  if (signal_number == SIGINT) return "SIGINT";
  if (signal_number == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal_number);
}

// The one line an interrupted command prints.
void PrintInterrupted(const char* command, const lb::reports::Report& report,
                      const fs::path& where) {
  std::cout << "leakbound " << command << ": interrupted by " << SignalName(g_stop_signal.load())
            << "; " << report.workloads.size()
            << (report.workloads.size() == 1 ? " workload" : " workloads")
            << " finished and written to " << where.string()
            << (report.meta.interrupted
                    ? " (report marked interrupted)\n"
                    : " (the signal came after the last one: report complete)\n");
}

lb::runtime::Device ParseDevice(const std::string& text) {
  if (text == "cpu") return lb::runtime::Device::Cpu();
  if (text == "cuda") return lb::runtime::Device::Cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string index = text.substr(5);
    if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos &&
        index.size() < 4) {
      return lb::runtime::Device::Cuda(std::stoi(index));
    }
  }
  throw UsageError("--device must be cpu, cuda or cuda:N, got '" + text + "'");
}

// The folders an output path will need that do not exist yet are removed again, deepest first
// and only while empty, when the command fails before writing into them: a failed command
// leaves nothing behind, and a folder that existed (or that another process has filled since)
// is never touched.
class OutputFolder {
 public:
  explicit OutputFolder(const fs::path& dir) {
    std::error_code ec;
    for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      missing_.push_back(p);
      if (p == p.parent_path()) break;
    }
  }
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  ~OutputFolder() {
    for (const fs::path& p : missing_) {  // deepest first
      std::error_code ec;
      if (!fs::is_directory(p, ec) || !fs::is_empty(p, ec) || ec) return;
      fs::remove(p, ec);
    }
  }

 private:
  std::vector<fs::path> missing_;
};

// Fails fast (before a long run) when the output folder cannot be created or written.
void EnsureWritableDir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw UsageError("cannot create output folder " + dir.string() + ": " + ec.message());
  const fs::path probe = dir / ".leakbound-write-test";
  {
    std::ofstream out(probe);
    if (!out) throw UsageError("output folder " + dir.string() + " is not writable");
  }
  fs::remove(probe, ec);
}

// Everything is rendered before anything is written: a failure while rendering (an internal
// error, exit 3) leaves the folder's previous set as it was. LEAKBOUND_TEST_FAULT=render makes
// that failure happen, for the CLI tests (harness/tests/cli_test.sh); it is no user option.
void WriteReportSet(const lb::reports::Report& report, const fs::path& dir) {
  const std::string markdown = lb::reports::RenderMarkdown(report);
  if (const char* fault = std::getenv("LEAKBOUND_TEST_FAULT");
      fault != nullptr && std::string(fault) == "render") {
    throw std::logic_error("a fault injected by LEAKBOUND_TEST_FAULT=render, after the Markdown "
                           "was rendered");
  }
  const std::string html = lb::reports::RenderHtml(report);
  lb::reports::WriteReportAtomically(report, dir / "report.json");
  lb::reports::WriteFileAtomically(dir / "report.md", markdown);
  lb::reports::WriteFileAtomically(dir / "report.html", html);
}

struct RunFlags {
  std::string device = "cpu";
  int blocks = 3;
  int steps = 16;
  int confirm_blocks = -1;
  std::string warmup = "auto";
  int threads = 1;
  std::string seed = "1";
  bool no_calibrate = false;
  bool quiet = false;
};

void AddRunFlags(CLI::App* cmd, RunFlags& f) {
  cmd->add_option("--device", f.device, "cpu (the CPU stub), cuda or cuda:N")
      ->capture_default_str();
  cmd->add_option("--blocks,-b", f.blocks, "measured blocks")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  cmd->add_option("--steps,-n", f.steps,
                  "steps per block (at least 4, and at least each workload's period)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--confirm-blocks", f.confirm_blocks,
                  "blocks run after a one-time rise of an exact counter, to see whether it rises "
                  "again (growth) or not (judged on return to baseline); -1: as many as --blocks, "
                  "0: none")
      ->check(CLI::Range(-1, 1000))
      ->capture_default_str();
  cmd->add_option("--warmup,-w", f.warmup,
                  "warm-up steps in [0, 1000000], or 'auto': the first block boundary after which "
                  "exact counters stop changing")
      ->capture_default_str();
  cmd->add_option("--blas-threads", f.threads,
                  "OpenBLAS threads for CPU sessions (0: OpenBLAS's own)")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->add_option("--seed", f.seed, "seed for workload data, an integer in [0, 2^64)")
      ->capture_default_str();
  cmd->add_flag("--no-calibrate", f.no_calibrate,
                "skip noise-floor calibration: noisy counters (RSS, the driver's, the host heap "
                "where the exact interposer is unavailable) are then reported, not judged, so "
                "zoo entries detected only by them count as missed");
  cmd->add_flag("--quiet,-q", f.quiet, "no progress on stderr");
}

lb::harness::SuiteOptions ToSuiteOptions(const RunFlags& f) {
  lb::harness::SuiteOptions o;
  o.run.device = ParseDevice(f.device);
  o.run.blocks = f.blocks;
  o.run.steps_per_block = f.steps;
  o.run.confirm_blocks = f.confirm_blocks;
  if (f.warmup == "auto") {
    o.run.warmup_steps = -1;
  } else {
    try {
      std::size_t used = 0;
      const long long w = std::stoll(f.warmup, &used);
      if (used != f.warmup.size() || w < 0 || w > 1000000) throw std::out_of_range("");
      o.run.warmup_steps = static_cast<int>(w);
    } catch (const std::exception&) {
      throw UsageError("--warmup must be 'auto' or a step count in [0, 1000000], got '" + f.warmup +
                       "'");
    }
  }
  if (f.threads < 0 || f.threads > 256) throw UsageError("--blas-threads must be in [0, 256]");
  o.run.blas_threads = f.threads;
  {
    std::uint64_t seed = 0;
    const char* first = f.seed.data();
    const char* last = first + f.seed.size();
    const auto [end, ec] = std::from_chars(first, last, seed);
    if (f.seed.empty() || ec != std::errc() || end != last) {
      throw UsageError("--seed must be an integer in [0, 18446744073709551615], got '" + f.seed +
                       "'");
    }
    o.run.seed = seed;
  }
  o.calibrate = !f.no_calibrate;
  o.progress = !f.quiet;
  try {
    lb::harness::ValidateRunOptions(o.run);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return o;
}

int CmdList(bool json) {
  const auto& all = lb::workloads::AllWorkloads();
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& reg : all) {
      const auto& w = reg.info;
      list.push_back({{"name", w.name},
                      {"kind", lb::workloads::KindName(w.kind)},
                      {"expectation", lb::reports::ToString(w.expectation)},
                      {"detected_by", w.detected_by},
                      {"needs_cuda", w.needs_cuda},
                      {"description", w.description}});
    }
    std::cout << list.dump(2) << "\n";
    return kOk;
  }
  std::size_t width = std::string_view("workload").size();
  for (const auto& reg : all) width = std::max(width, reg.info.name.size());
  const int w0 = static_cast<int>(width);
  std::printf("%-*s %-6s %-26s %s\n", w0, "workload", "kind", "expectation", "description");
  for (const auto& reg : all) {
    const auto& w = reg.info;
    std::printf("%-*s %-6s %-26s %s%s\n", w0, w.name.c_str(), lb::workloads::KindName(w.kind),
                lb::reports::ToString(w.expectation).c_str(), w.description.c_str(),
                w.needs_cuda ? " [cuda only]" : "");
  }
  return kOk;
}

int CmdRun(const RunFlags& flags, const std::vector<std::string>& names, bool all,
           const fs::path& out, const std::string& trace_out) {
  if (names.empty() && !all)
    throw UsageError("name workloads to run, or pass --all (see `leakbound list`)");
  if (!names.empty() && all) throw UsageError("pass either workload names or --all, not both");
  lb::harness::SuiteOptions options = ToSuiteOptions(flags);
  options.workloads = names;
  lb::harness::SelectWorkloads(options);  // names, duplicates, device, schedule: before writing
  lb::harness::StartDeviceObservers(options.run.device);  // before the first CUDA call
  lb::harness::DeviceClass(
      options.run.device);  // opens the device: fails before anything is written
  // The CPU device loads OpenBLAS when its first backend is made: a missing one is said here,
  // and its loading is not inside any workload's blocks. Only `run` does this: the other
  // commands never multiply, and OpenBLAS's worker threads spin for ~0.1 s after it loads.
  if (options.run.device.kind == lb::runtime::DeviceKind::kCpu) (void)lb::runtime::MakeCpuBackend();
  const OutputFolder folder(out);
  EnsureWritableDir(out);
  options.stop = &g_stop_signal;
  lb::harness::TraceFile traces;
  const lb::reports::Report report = lb::harness::RunSuite(options, &traces);
  WriteReportSet(report, out);
  // The record the verdicts came from: `leakbound judge trace.json` reproduces them.
  lb::harness::WriteTraceFileAtomically(traces, out / "trace.json");
  if (!trace_out.empty()) lb::harness::WriteTraceFileAtomically(traces, trace_out);
  if (report.meta.interrupted || g_stop_signal.load() != 0) {
    PrintInterrupted("run", report, out);
    return InterruptedExitCode();
  }
  lb::harness::PrintSummary(report, std::cout);
  std::cout << "\n";
  lb::harness::PrintDetectionTable(report, std::cout);
  std::cout << "\nreports: " << (out / "report.json").string()
            << ", report.md, report.html, trace.json\n";
  const bool ok = lb::harness::AllExpectationsMet(report);
  if (!ok) std::cout << "RESULT: at least one workload did not meet its expectation\n";
  return ok ? kOk : kFailed;
}

int CmdDiff(const fs::path& base, const fs::path& fresh, const lb::reports::DiffTolerance& tol,
            const std::string& out) {
  const lb::reports::Report b = lb::reports::LoadReport(base);
  const lb::reports::Report f = lb::reports::LoadReport(fresh);
  const lb::reports::DiffResult d = lb::reports::DiffReports(b, f, tol);
  if (!out.empty()) lb::reports::WriteFileAtomically(out, d.markdown);
  std::cout << d.markdown;
  return d.regression ? kFailed : kOk;
}

// Baselines: one report per clean workload, baselines/<device-class>/<workload>.json.
int CmdCheck(const RunFlags& flags, const fs::path& baselines, const fs::path& out,
             lb::reports::DiffTolerance tol, bool update) {
  lb::harness::SuiteOptions options = ToSuiteOptions(flags);
  lb::harness::SelectWorkloads(options);  // invalid_argument: a usage error (exit 2) in main
  lb::harness::StartDeviceObservers(options.run.device);  // before the first CUDA call
  std::vector<lb::reports::Report> bases;
  if (!update) {
    if (fs::exists(baselines) && !fs::is_directory(baselines)) {
      throw UsageError(
          "--baselines " + baselines.string() +
          " is a file; pass the folder that holds one <workload>.json per clean workload");
    }
    if (!fs::is_directory(baselines)) {
      throw UsageError(
          "baseline folder " + baselines.string() +
          " does not exist; create it with `leakbound check --baselines DIR --update`");
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(baselines))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      throw UsageError("no baseline reports (*.json) in " + baselines.string() +
                       "; record them with `leakbound check --baselines " + baselines.string() +
                       " --update`");
    }
    for (const fs::path& p : files) bases.push_back(lb::reports::LoadReport(p));
    const std::string device_class = lb::harness::DeviceClass(options.run.device);
    for (std::size_t i = 0; i < bases.size(); ++i) {
      if (bases[i].meta.device_class != device_class) {
        throw lb::reports::ReportError(lb::reports::ReportErrorKind::kDeviceClassMismatch,
                                       files[i].string(), "$.meta.device_class",
                                       files[i].string() + ": baseline is for device class '" +
                                           bases[i].meta.device_class + "' but this run is on '" +
                                           device_class + "'; use baselines/" + device_class);
      }
    }
  }
  const OutputFolder folder(out);
  EnsureWritableDir(out);
  options.stop = &g_stop_signal;
  const lb::reports::Report report = lb::harness::RunSuite(options);
  WriteReportSet(report, out);
  const bool interrupted = report.meta.interrupted || g_stop_signal.load() != 0;
  if (interrupted && update) {  // a partial run never replaces a baseline
    PrintInterrupted("check --update", report, out);
    return InterruptedExitCode();
  }
  if (!interrupted) lb::harness::PrintSummary(report, std::cout);
  if (update) {
    if (!lb::harness::AllExpectationsMet(report)) {
      std::cout << "check --update: not every workload met its expectation; the baselines in "
                << baselines.string() << " were left as they were (see "
                << (out / "report.md").string() << ")\n";
      return kFailed;
    }
    EnsureWritableDir(baselines);
    int written = 0;
    for (const auto& w : report.workloads) {
      if (w.kind != "clean") continue;
      lb::reports::Report one;
      one.meta = report.meta;
      one.workloads.push_back(w);
      lb::reports::WriteReportAtomically(one, baselines / (w.name + ".json"));
      ++written;
    }
    std::cout << "wrote " << written << " baseline reports to " << baselines.string() << "\n";
    return kOk;
  }
  // One document: its first line is the verdict over every baseline (and every clean workload
  // without one), then the regressions with their evidence, then the full table.
  const lb::reports::DiffResult d =
      lb::reports::DiffAgainstBaselines(bases, report, tol, baselines.string());
  lb::reports::WriteFileAtomically(out / "diff.md", d.markdown);
  if (interrupted) {
    PrintInterrupted("check", report, out);
    return InterruptedExitCode();
  }
  std::cout << "\n" << d.markdown;
  const bool met = lb::harness::AllExpectationsMet(report);
  std::cout << "check: " << bases.size() << " baselines, " << d.regressions << " regressions, "
            << (d.unchecked > 0
                    ? std::to_string(d.unchecked) + " clean workloads without a baseline, "
                    : std::string())
            << (met ? "every expectation met" : "some expectations NOT met") << "\n";
  // A clean workload nobody baselined would pass CI unguarded: that fails the check too.
  return !d.regression && met ? kOk : kFailed;
}

int CmdRender(const fs::path& input, bool html, bool markdown, bool junit,
              const std::string& out) {
  if (!html && !markdown && !junit && !out.empty()) {  // the format from --out's extension
    const std::string ext = fs::path(out).extension().string();
    html = ext == ".html" || ext == ".htm";
    markdown = ext == ".md";
    junit = ext == ".xml";
  }
  if (int(html) + int(markdown) + int(junit) != 1) {
    throw UsageError(
        "pass exactly one of --html, --markdown or --junit (or an --out ending in .html, .md "
        "or .xml)");
  }
  if (fs::is_directory(input)) {
    throw UsageError(input.string() + " is a folder; pass the report file inside it, e.g. " +
                     (input / "report.json").string());
  }
  if (!out.empty() && fs::is_directory(out)) {
    throw UsageError("--out " + out + " is a folder; name the file to write, e.g. " +
                     (fs::path(out) / (html ? "report.html" : junit ? "junit.xml" : "report.md"))
                         .string());
  }
  const lb::reports::Report report = lb::reports::LoadReport(input);
  const std::string text = html    ? lb::reports::RenderHtml(report)
                           : junit ? lb::reports::RenderJunit(report)
                                   : lb::reports::RenderMarkdown(report);
  if (out.empty()) {
    std::cout << text;
  } else {
    lb::reports::WriteFileAtomically(out, text);
  }
  return kOk;
}

// Re-judges a recorded trace file: the verdicts of a run (or of a GPU run, on a CPU) from the
// record alone. TraceError (a std::invalid_argument) is an input error: exit 2 in main.
int CmdJudge(const fs::path& trace_path, const std::string& out) {
  if (fs::is_directory(trace_path)) {
    throw UsageError(trace_path.string() + " is a folder; pass the trace file inside it, e.g. " +
                     (trace_path / "trace.json").string());
  }
  const lb::harness::TraceFile file = lb::harness::LoadTraceFile(trace_path);
  if (file.traces.empty()) {
    throw UsageError(trace_path.string() + " holds no traces: nothing to judge (a trace.json "
                     "from `leakbound run` or `leakbound watch` has one per workload or process)");
  }
  const lb::reports::Report report = lb::harness::JudgeTraceFile(file);
  if (!out.empty()) {
    const OutputFolder folder(out);
    EnsureWritableDir(out);
    WriteReportSet(report, out);
  }
  lb::harness::PrintSummary(report, std::cout);
  std::cout << "\n";
  lb::harness::PrintDetectionTable(report, std::cout);
  if (!out.empty()) {
    std::cout << "\nreports: " << (fs::path(out) / "report.json").string()
              << ", report.md, report.html\n";
  }
  // A watch trace exits as `watch` did (docs/watch.md, "Exit codes"): a leak in any process 1,
  // else a failed recording (a crash, verdict error) 5, else inconclusive 4. The program's own
  // exit status is not in the trace, nor an interruption, nor a process of the job that crashed
  // before it could be judged (summarised, not traced): a run that watch ended with 5 for one
  // of those, or with 128 + N, is 0 here when its memory was bounded.
  const bool watched = std::all_of(report.workloads.begin(), report.workloads.end(),
                                   lb::reports::IsWatched);
  if (watched) {
    auto any = [&](auto&& pred) {
      return std::any_of(report.workloads.begin(), report.workloads.end(), pred);
    };
    if (any([](const auto& w) { return lb::reports::IsMemoryFinding(w.verdict); })) {
      std::cout << "RESULT: a leak in a watched process\n";
      return kFailed;
    }
    if (any([](const auto& w) { return w.verdict == lb::reports::kError; })) {
      std::cout << "RESULT: a watched process failed and no leak was found in what arrived\n";
      return kWatchProgramFailed;
    }
    if (any([](const auto& w) { return w.verdict == lb::reports::kInconclusive; })) {
      std::cout << "RESULT: inconclusive: see the evidence for what a verdict needs\n";
      return kWatchInconclusive;
    }
    return kOk;
  }
  const bool ok = lb::harness::AllExpectationsMet(report);
  if (!ok) std::cout << "RESULT: at least one workload did not meet its expectation\n";
  return ok ? kOk : kFailed;
}

// "unknown subcommand 'X'; the subcommands are: list, run, ..." for a first argument that names
// none, before CLI11 would call it an unexpected argument.
bool RejectUnknownSubcommand(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string name = argv[1];
  std::string known;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return false;
    known += (known.empty() ? "" : ", ") + sub->get_name();
  }
  std::cerr << "leakbound: unknown subcommand '" << name << "'; the subcommands are: " << known
            << " (see `leakbound --help`)\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // `watch` parses its own arguments: everything after `--` belongs to the watched program.
  if (argc >= 2 && std::string_view(argv[1]) == "watch") {
    return lb::harness::WatchMain(argc - 1, argv + 1);
  }
  CLI::App app{
      "leakbound: is device memory bounded across repeated steps? Runs workloads in blocks "
      "of steps, judges every counter for flatness and return to baseline, and writes "
      "JSON/Markdown/HTML reports and regression diffs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", LEAKBOUND_VERSION);

  bool list_json = false;
  auto* list = app.add_subcommand("list", "list workloads with their kind and expectation");
  list->add_flag("--json", list_json, "machine-readable output");

  RunFlags run_flags;
  std::vector<std::string> names;
  bool all = false;
  std::string out_dir = "reports/latest";
  auto* run = app.add_subcommand("run", "run workloads and write report.json/.md/.html");
  run->add_option("workloads", names, "workload names (see `leakbound list`)");
  run->add_flag("--all", all, "run every workload that runs on the device");
  run->add_option("--out,-o", out_dir, "output folder (report.json/.md/.html and trace.json)")
      ->capture_default_str();
  std::string trace_out;
  run->add_option(
      "--trace", trace_out,
      "also write the recorded trace to this file (re-judge it with `leakbound judge`)");
  AddRunFlags(run, run_flags);

  std::string base_path, new_path, diff_out;
  lb::reports::DiffTolerance tol;
  auto* diff =
      app.add_subcommand("diff", "Markdown regression diff of two reports; exit 1 on a regression");
  diff->add_option("base", base_path, "baseline report.json")->required();
  diff->add_option("new", new_path, "new report.json")->required();
  diff->add_option("--tolerance", tol.relative,
                   "relative tolerance for memory figures, a fraction: 0.05 = 5%")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  auto* diff_time =
      diff->add_option("--time-tolerance", tol.step_time_relative,
                       "relative tolerance for step time, a fraction: 0.5 = +50% (a watched "
                       "program's step time is shown, not compared, unless this is given)")
          ->check(CLI::Range(0.0, 1e6))
          ->capture_default_str();
  diff->add_option("--out,-o", diff_out, "also write the Markdown to this file");

  RunFlags check_flags;
  std::string baselines = "baselines/cpu";
  std::string check_out = "reports/check";
  bool update = false;
  lb::reports::DiffTolerance check_tol;
  // Baselines are recorded on another machine: timing is shown, not compared, unless asked for.
  auto* check = app.add_subcommand(
      "check",
      "run everything and diff against committed baselines; exit 1 on a regression, a missed "
      "expectation, or a clean workload without a baseline");
  check->add_option("--baselines", baselines, "baseline folder (one report per clean workload)")
      ->capture_default_str();
  check->add_option("--out,-o", check_out, "output folder for the fresh reports and diff.md")
      ->capture_default_str();
  check->add_flag("--update", update, "rewrite the baselines from this run instead of diffing");
  check
      ->add_option("--tolerance", check_tol.relative,
                   "relative tolerance for memory figures, a fraction: 0.05 = 5%")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  auto* check_time = check
                         ->add_option("--time-tolerance", check_tol.step_time_relative,
                                      "relative tolerance for step time, e.g. 0.5 = +50% (default: "
                                      "not compared: baselines come from another machine)")
                         ->check(CLI::Range(0.0, 1e6));
  AddRunFlags(check, check_flags);

  std::string render_in, render_out;
  bool as_html = false, as_md = false, as_junit = false;
  // Listed for --help and the unknown-subcommand message; main() hands `watch` to WatchMain
  // before parsing, so this entry never parses anything itself.
  app.add_subcommand("watch",
                     "judge a program leakbound did not write: leakbound watch [options] -- CMD "
                     "[ARGS...] (see `leakbound watch --help`)");
  auto* render =
      app.add_subcommand("render", "render a report.json as HTML, Markdown or JUnit XML");
  render->add_option("report", render_in, "report.json")->required();
  render->add_flag("--html", as_html, "self-contained HTML with SVG charts");
  render->add_flag("--markdown", as_md, "Markdown summary");
  render->add_flag("--junit", as_junit,
                   "JUnit XML for CI: a test case per workload, a failure per workload that did "
                   "not meet its expectation (a watched program: a leak)");
  render->add_option("--out,-o", render_out, "output file (default: stdout)");

  std::string judge_in, judge_out;
  auto* judge = app.add_subcommand(
      "judge",
      "re-judge a recorded trace.json (from `run` or `watch`): print the summary and detection "
      "table; exit as the command that wrote it: run's 0/1, watch's 0/1/4/5 (a leak 1, a failed "
      "recording 5, inconclusive 4; the program's own exit status, an interruption and a process "
      "of the job that crashed too soon to be judged are not in the trace)");
  judge->add_option("trace", judge_in, "trace.json written by `leakbound run` or `leakbound watch`")
      ->required();
  judge->add_option("--out,-o", judge_out,
                    "write report.json/.md/.html to this folder (default: print only)");

  // Subcommands defined in their own files register here and set `extra_action` from their
  // callback, e.g. AddWatchCommand(app, extra_action) from harness/src/watch_command.cc.
  std::function<int()> extra_action;

  if (RejectUnknownSubcommand(app, argc, argv)) return kUsage;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }
  try {
    if (extra_action) return extra_action();
    if (*list) return CmdList(list_json);
    if (*run || *check) InstallStopHandlers();
    if (*run) return CmdRun(run_flags, names, all, out_dir, trace_out);
    if (*diff) {
      tol.compare_watched_step_time = diff_time->count() > 0;
      return CmdDiff(base_path, new_path, tol, diff_out);
    }
    if (*check) {
      check_tol.compare_step_time = check_time->count() > 0;
      return CmdCheck(check_flags, baselines, check_out, check_tol, update);
    }
    if (*render) return CmdRender(render_in, as_html, as_md, as_junit, render_out);
    if (*judge) return CmdJudge(judge_in, judge_out);
  } catch (const UsageError& e) {
    std::cerr << "leakbound: " << e.what() << "\n";
    return kUsage;
  } catch (const std::invalid_argument& e) {
    std::cerr << "leakbound: " << e.what() << "\n";
    return kUsage;
  } catch (const lb::reports::ReportError& e) {
    std::cerr << "leakbound: " << e.what() << "\n";
    return kUsage;
  } catch (const lb::runtime::DeviceUnavailableError& e) {
    std::cerr << "leakbound: " << e.what() << "\n";
    return kUsage;
  } catch (const std::exception& e) {
    std::cerr << "leakbound: internal error: " << e.what() << "\n";
    return kInternal;
  } catch (...) {
    std::cerr << "leakbound: internal error: a non-standard exception\n";
    return kInternal;
  }
  return kUsage;
}
