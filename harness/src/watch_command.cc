// `leakbound watch [options] -- CMD [ARGS...]`: the command's options. Everything else (running
// the program and its process tree, the traces, the judgement, the reports) is the watcher's,
// watch/watcher (leakbound/watch/watcher.h). docs/watch.md.
#include "leakbound/harness/watch_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string_view>

#include "leakbound/reports/report_error.h"
#include "leakbound/watch/heap.h"
#include "leakbound/watch/watcher.h"

namespace leakbound::harness {
namespace {

namespace fs = std::filesystem;
using watch::WatchOptions;
using watch::WatchUsageError;

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
exited non-zero (its status is in the report); 2 usage error (nothing written), or the
reports could not be written (the message names the file); 3 internal error; 4 inconclusive (the report says what it needs); 5 the program failed (crashed, was
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

// The report's default name: the program's file name, and for an interpreter (python3, bash,
// sh) the script it runs too ("python3 train.py", "python3 -m pkg.mod"), so that two scripts'
// reports do not share one workload name in `diff` and `check`.
std::string DefaultName(const std::vector<std::string> &command) {
  const std::string base = fs::path(command.front()).filename().string();
  const bool python = base.rfind("python", 0) == 0 &&
                      base.find_first_not_of("0123456789.", 6) == std::string::npos;
  const bool shell = base == "bash" || base == "sh" || base == "dash";
  if (!python && !shell) return base;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string &arg = command[i];
    if (arg == "-") return base;  // the program comes from standard input
    if (arg == "--") continue;    // the end of the options: the script follows
    const bool flags = arg.size() > 1 && (arg[0] == '-' || (shell && arg[0] == '+')) &&
                       arg.rfind("--", 0) != 0;
    if (flags && arg.find('c') != std::string::npos) return base;  // -c, -uc, -ec: a command line
    if (python && flags && arg.back() == 'm' && i + 1 < command.size()) {
      return base + " -m " + command[i + 1];
    }
    // Options that take the next argument.
    if ((python && (arg == "-W" || arg == "-X" || arg == "--check-hash-based-pycs")) ||
        (shell && (arg == "-o" || arg == "+o" || arg == "-O" || arg == "+O"))) {
      ++i;
      continue;
    }
    if (!arg.empty() && (arg[0] == '-' || (shell && arg[0] == '+'))) continue;
    return base + " " + fs::path(arg).filename().string();
  }
  return base;
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
      "leakbound watch [OPTIONS] -- CMD [ARGS...]: is memory bounded across the steps of a "
      "program leakbound did not write? Runs CMD under the exact heap interposer, samples its "
      "counters at each step, judges them like `leakbound run` and writes "
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
  app.add_option("--blocks,-b", o.blocks,
                 "measured blocks (3 to 1000: the census needs two blocks a block old beside the "
                 "newest)")
      ->capture_default_str();
  app.add_option("--warmup,-w", warmup,
                 "warm-up steps, or 'auto' (the first block boundary after "
                 "which the counters "
                 "stop changing; if they never do, the first block)")
      ->capture_default_str();
  app.add_option("--name", o.name,
                 "workload name in the report (default: the program's file name; for python3, "
                 "bash or sh, with the script it runs: \"python3 train.py\")");
  std::string out = "leakbound-watch", junit, pprof;
  app.add_option("--pprof", pprof,
                 "also write DIR/first.pb.gz and last.pb.gz (call-site survivors at the first and "
                 "last measured block, for `pprof -diff_base`) and DIR/growing.folded (what grew, "
                 "as collapsed stacks); a folder per judged process when there are several");
  app.add_option("--junit", junit,
                 "also write JUnit XML to FILE: one test case per judged process, a leak is a "
                 "failure with its rate and top call site (GITHUB_ACTIONS=true also prints "
                 "::error annotations on the leaking line)");
  app.add_option("--out,-o", out, "report folder")->capture_default_str();
  app.add_flag("--keep-pymalloc", o.keep_pymalloc,
               "leave Python's small-object allocator on (by default watch sets "
               "PYTHONMALLOC=malloc so every Python object is counted exactly): objects are then "
               "counted through pymalloc's allocator hooks from the moment leakbound's module "
               "loads (at start-up with --step-on), faster, less tried");
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
  bool no_python_lines = false;
  app.add_flag("--no-python-lines", no_python_lines,
               "do not trace the Python line of a growing call site's samples (sets "
               "LEAKBOUND_PYTHON_LINES=0; rows keep their native names; its cost: docs/watch.md, "
               "\"Overhead\")");
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
  // Two blocks leave one aged block, from which the census cannot tell a leak from a one-time
  // rise (a steady 64 B/step leak was judged PASS at --blocks 2).
  if (o.blocks < 3 || o.blocks > 1000) {
    throw WatchUsageError("--blocks must be from 3 to 1000 (the census needs two aged blocks "
                          "beside the newest), got " + std::to_string(o.blocks));
  }
  if (warmup != "auto") {
    size_t used = 0;
    try {
      o.warmup_steps = std::stoi(warmup, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    // The trace's own bound on a warm-up (docs/trace-schema.md).
    if (used != warmup.size() || o.warmup_steps < 0 || o.warmup_steps > 100000000) {
      throw WatchUsageError("--warmup must be 'auto' or a number of steps from 0 to 100000000, "
                            "got '" + warmup + "'");
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
  o.python_lines = !no_python_lines;
  o.out = out;
  if (!junit.empty()) {
    const fs::path parent = fs::absolute(junit).parent_path();
    std::error_code ec;
    if (!fs::is_directory(parent, ec) || ::access(parent.c_str(), W_OK) != 0) {
      throw WatchUsageError("--junit " + junit + ": the folder " + parent.string() +
                            " does not exist or cannot be written");
    }
    o.junit = junit;
  }
  if (!pprof.empty()) {
    std::error_code ec;
    fs::create_directories(pprof, ec);
    if (ec || ::access(pprof.c_str(), W_OK) != 0) {
      throw WatchUsageError("--pprof " + pprof + ": cannot make or write the folder" +
                            (ec ? ": " + ec.message() : std::string()));
    }
    o.pprof = pprof;
  }
  if (o.name.empty()) o.name = DefaultName(o.command);
  return parsed;
}

}  // namespace

int WatchMain(int argc, char **argv) {
  // The watcher never reads its own heap's counters (they are the stress harness's): its own
  // allocations, the traces and reports it makes, go to glibc without a record. Counted, their
  // record tables were ~30 of its page faults and its hooks ~10% of its instructions after
  // `watch -- /bin/true`, all on the program's time.
  leakbound_heap_set_counting(0);
  try {
    const Parsed parsed = Parse(argc, argv);
    if (parsed.help_only) return watch::kExitOk;
    return watch::RunWatch(parsed.options);
  } catch (const WatchUsageError &e) {
    std::cerr << "leakbound watch: " << e.what() << "\n(see `leakbound watch --help`)\n";
    return watch::kExitUsage;
  } catch (const reports::ReportError &e) {  // a report file that could not be written
    std::cerr << "leakbound watch: " << e.what() << "\n";
    return watch::kExitUsage;
  } catch (const std::exception &e) {
    std::cerr << "leakbound watch: internal error: " << e.what()
              << "\nplease report it with the command line\n";
    return watch::kExitInternal;
  }
}

}  // namespace leakbound::harness
