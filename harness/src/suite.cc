// Suite: calibration, the run over all workloads with progress, metadata, console tables.
#include "leakbound/harness/suite.h"

#include "leakbound/harness/device_probes.h"
#include "leakbound/harness/judge.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "leakbound/reports/format.h"
#include "leakbound/runtime/trainer.h"

#ifndef LEAKBOUND_GIT_COMMIT
#define LEAKBOUND_GIT_COMMIT "unknown"
#endif
#ifndef LEAKBOUND_BUILD_TYPE
#define LEAKBOUND_BUILD_TYPE "unknown"
#endif
#ifndef LEAKBOUND_VERSION
#define LEAKBOUND_VERSION "0.0.0"
#endif

namespace leakbound::harness {
namespace {

using Clock = std::chrono::steady_clock;

std::string Compiler() {
#if defined(__clang__)
  return "Clang " + std::string(__clang_version__);
#elif defined(__GNUC__)
  return "GNU " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

std::string NowIso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string DeviceDescription(const runtime::Device& device) {
  if (device.kind == runtime::DeviceKind::kCpu) return "cpu (CPU stub)";
  runtime::SessionOptions options;
  options.device = device;
  options.track_allocations = false;
  runtime::EagerSession probe(options);
  return device.ToString() + " " + probe.backend().Describe() + "; CUPTI observer " +
         DeviceObserverState();
}

// Median time of the medium MLP training step and of one sample of the default probes, measured
// back to back in this process (issue target: probes < 1% of the step).
void MeasureProbeCost(const RunOptions& options, reports::Report& report) {
  runtime::SessionOptions session_options;
  session_options.device = options.device;
  session_options.blas_threads = options.blas_threads;
  runtime::EagerSession session(session_options);
  runtime::Mlp model(session, {1024, 1024, 1024, 10}, runtime::Activation::kRelu, 3);
  auto optimizer = runtime::MakeOptimizer(runtime::OptimizerKind::kSgd, model.params());
  runtime::Trainer trainer(session, model, *optimizer);
  const runtime::Batch batch = runtime::Batch::Random(128, 1024, 10, 4);
  trainer.Step(batch);
  std::vector<double> step_ns;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    trainer.Step(batch);
    step_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  auto probes = DefaultProbes(options.device, [&] { return std::vector{&session}; });
  std::vector<double> sample, probe_ns;
  sample.reserve(64);
  for (int i = 0; i < 200; ++i) {
    const auto t0 = Clock::now();
    sample.clear();
    for (auto& p : probes) p->Sample(sample);
    probe_ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  std::sort(step_ns.begin(), step_ns.end());
  std::sort(probe_ns.begin(), probe_ns.end());
  const double step = step_ns[step_ns.size() / 2];
  const double probe = probe_ns[probe_ns.size() / 2];
  report.benchmarks.push_back({"medium_mlp_step_time", step, "ns"});
  report.benchmarks.push_back({"probe_sample_time", probe, "ns"});
  report.benchmarks.push_back({"probe_cost_percent_of_medium_step", 100.0 * probe / step, "%"});
}

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(2) == 1) {}
  void Step(const std::string& name, int done, int planned, int index, int total) {
    if (!tty_) return;
    const int width = 30;
    const int filled = planned > 0 ? std::min(width, done * width / planned) : 0;
    std::fprintf(stderr, "\r[%2d/%d] %-28s [%s%s] %4d/%-4d", index, total, name.c_str(),
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), '.').c_str(), done, planned);
  }
  void Done(const reports::WorkloadResult& r, int index, int total, double seconds) {
    if (!enabled_) return;
    if (tty_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "[%2d/%d] %-28s %-26s %s (%.2f s)\n", index, total, r.name.c_str(),
                 reports::ToString(r.verdict).c_str(), r.met_expectation ? "as expected" : "UNEXPECTED", seconds);
  }
  void Note(const std::string& line) {
    if (enabled_) std::fprintf(stderr, "%s\n", line.c_str());
  }

 private:
  bool enabled_;
  bool tty_;
};

}  // namespace

std::string DeviceClass(const runtime::Device& device) {
  if (device.kind == runtime::DeviceKind::kCpu) return "cpu";
  std::string name = DeviceDescription(device);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* known : {"h200", "h100", "b200", "a100", "l40s", "l4", "a10", "t4", "v100"}) {
    if (name.find(known) != std::string::npos) return known;
  }
  return "cuda";
}

reports::RunMetadata CurrentMetadata(const RunOptions& options) {
  reports::RunMetadata m;
  m.tool_version = LEAKBOUND_VERSION;
  m.commit = LEAKBOUND_GIT_COMMIT;
  m.compiler = Compiler();
  m.build_type = LEAKBOUND_BUILD_TYPE;
  m.device = DeviceDescription(options.device);
  m.device_class = DeviceClass(options.device);
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  m.hostname = host;
  m.started_at = NowIso();
  m.blocks = options.blocks;
  m.steps_per_block = options.steps_per_block;
  m.warmup_steps = options.warmup_steps;
  m.seed = options.seed;
  m.blas_threads = options.blas_threads;
  return m;
}

std::vector<const workloads::Registration*> SelectWorkloads(const SuiteOptions& options) {
  ValidateRunOptions(options.run);
  std::vector<const workloads::Registration*> selected;
  const bool cuda = options.run.device.kind == runtime::DeviceKind::kCuda;
  if (options.workloads.empty()) {
    for (const auto& reg : workloads::AllWorkloads())
      if (cuda || !reg.info.needs_cuda) selected.push_back(&reg);
    for (const workloads::Registration* r : selected) ValidateScheduleFor(options.run, r->info);
    return selected;
  }
  for (const std::string& name : options.workloads) {
    const workloads::Registration* reg = workloads::FindWorkload(name);
    if (reg == nullptr) {
      std::string known;
      for (const auto& r : workloads::AllWorkloads()) known += (known.empty() ? "" : ", ") + r.info.name;
      throw std::invalid_argument("unknown workload '" + name + "'; known workloads: " + known +
                                  " (see `leakbound list`)");
    }
    if (reg->info.needs_cuda && !cuda) {
      throw std::invalid_argument("workload '" + name + "' needs a CUDA device; run it with --device cuda");
    }
    if (std::find(selected.begin(), selected.end(), reg) != selected.end()) {
      throw std::invalid_argument("workload '" + name +
                                  "' is named twice; a report holds each workload once");
    }
    selected.push_back(reg);
  }
  for (const workloads::Registration* reg : selected) ValidateScheduleFor(options.run, reg->info);
  return selected;
}

reports::Report RunSuite(const SuiteOptions& options, TraceFile* traces) {
  const std::vector<const workloads::Registration*> selected = SelectWorkloads(options);
  const auto started = Clock::now();
  reports::Report report;
  report.meta = CurrentMetadata(options.run);
  report.meta.calibrated = options.calibrate && options.calibration_runs > 0;
  Progress progress(options.progress);

  RunOptions run = options.run;
  if (options.calibrate) {
    progress.Note("calibrating noise floors of noisy counters on clean runs ...");
    run.noise_floors = Runner(options.run).Calibrate({"mlp_sgd", "mlp_eval"}, options.calibration_runs);
    for (const auto& [name, floor] : run.noise_floors) {
      // Noisy counters are byte counters (host heap, RSS, driver memory) or counts.
      const bool bytes = name.size() >= 5 && name.compare(name.size() - 5, 5, "bytes") == 0;
      report.benchmarks.push_back({"noise_floor." + name + ".slope_per_step", floor.slope_per_step,
                                   bytes ? "bytes/step" : "per step"});
      report.benchmarks.push_back({"noise_floor." + name + ".total_growth", floor.total_growth,
                                   bytes ? "bytes" : "count"});
    }
  }
  run.stop = options.stop;
  const Runner runner(run);
  JudgeSettings judge;
  judge.noise_floors = run.noise_floors;
  if (traces != nullptr) {
    traces->traces.clear();
    traces->noise_floors = run.noise_floors;
  }
  auto stopped = [&] { return options.stop != nullptr && options.stop->load() != 0; };
  const int total = static_cast<int>(selected.size());
  for (int i = 0; i < total && !stopped(); ++i) {
    const auto t0 = Clock::now();
    Trace trace =
        runner.Record(*selected[static_cast<std::size_t>(i)], [&](const std::string& name, int done, int planned) {
          progress.Step(name, done, planned, i + 1, total);
        });
    if (stopped()) break;  // the workload in progress is dropped, the finished ones are kept
    reports::WorkloadResult result = Judge(trace, judge);
    progress.Done(result, i + 1, total, std::chrono::duration<double>(Clock::now() - t0).count());
    report.workloads.push_back(std::move(result));
    if (traces != nullptr) traces->traces.push_back(std::move(trace));
  }
  report.meta.interrupted = stopped();
  if (options.measure_probe_cost && !report.meta.interrupted) MeasureProbeCost(options.run, report);
  report.meta.wall_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (traces != nullptr) traces->meta = report.meta;
  return report;
}

bool AllExpectationsMet(const reports::Report& report) {
  return std::all_of(report.workloads.begin(), report.workloads.end(),
                     [](const auto& w) { return w.met_expectation; });
}

void PrintSummary(const reports::Report& report, std::ostream& out) {
  // As wide as the longest name ("train.sh / python3, child of train.sh"), so columns stay apart.
  std::size_t width = 29;
  for (const auto& w : report.workloads) width = std::max(width, w.name.size());
  const int name_width = static_cast<int>(width) + 1;
  out << std::left << std::setw(name_width) << "workload" << std::setw(9) << "kind" << std::setw(26)
      << "verdict" << std::setw(10) << "met?" << std::right << std::setw(12) << "steady"
      << std::setw(12) << "peak" << std::setw(13) << "allocs/step" << std::setw(12) << "step time"
      << "\n";
  for (const auto& w : report.workloads) {
    std::ostringstream allocs;
    allocs << std::fixed << std::setprecision(1) << w.allocations_per_step;
    out << std::left << std::setw(name_width) << w.name << std::setw(9) << w.kind << std::setw(26)
        << w.verdict << std::setw(10)
        << (reports::IsWatched(w) ? "-" : w.met_expectation ? "yes" : "NO") << std::right
        << std::setw(12) << reports::FormatBytes(w.steady_live_bytes) << std::setw(12)
        << reports::FormatBytes(w.peak_bytes) << std::setw(13) << allocs.str() << std::setw(12)
        << reports::FormatDuration(w.step_time_ns) << "\n";
  }
  for (const auto& b : report.benchmarks) {
    if (b.name == "probe_cost_percent_of_medium_step") {
      out << "probe sampling: " << std::setprecision(3) << b.value
          << "% of the medium MLP training step (batch 128, 1024-1024-1024-10)\n";
    }
  }
  const bool watched =
      !report.workloads.empty() &&
      std::all_of(report.workloads.begin(), report.workloads.end(), reports::IsWatched);
  out << (watched ? "watch wall time: " : "suite wall time: ") << std::fixed
      << std::setprecision(1) << report.meta.wall_seconds << " s\n";
}

void PrintDetectionTable(const reports::Report& report, std::ostream& out) {
  std::map<reports::VerdictClass, std::pair<int, int>> by_class;  // planted class -> (entries, detected)
  int clean = 0, false_positives = 0, errors = 0, watched = 0, watched_leaks = 0;
  for (const auto& w : report.workloads) {
    if (reports::IsWatched(w)) {  // no expectation: a leak is a finding, not a false positive
      ++watched;
      watched_leaks += reports::IsMemoryFinding(w.verdict) ? 1 : 0;
    } else if (w.kind == "zoo") {
      auto& [entries, detected] = by_class[w.expectation];
      ++entries;
      detected += w.met_expectation ? 1 : 0;
    } else {
      ++clean;
      errors += w.verdict == reports::kError ? 1 : 0;
      false_positives += w.verdict != reports::kPass && w.verdict != reports::kError ? 1 : 0;
    }
  }
  out << "detection table\n";
  out << std::left << std::setw(28) << "planted class" << std::right << std::setw(9) << "entries"
      << std::setw(10) << "detected" << "\n";
  for (const auto& [cls, counts] : by_class) {
    out << std::left << std::setw(28) << cls << std::right << std::setw(9) << counts.first
        << std::setw(10) << counts.second << "\n";
  }
  out << "clean workloads and traps: " << clean << ", false positives: " << false_positives;
  if (errors > 0) out << ", errors: " << errors;
  if (watched > 0) out << "; watched programs: " << watched << ", leaks found: " << watched_leaks;
  out << "\n";
}

}  // namespace leakbound::harness
