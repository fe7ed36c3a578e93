// Suite: runs a set of workloads into one Report (metadata, results, figures), with progress on
// stderr, and the console tables (summary, detection) the CLI and tests print.
#pragma once

#include <atomic>
#include <iosfwd>
#include <string>
#include <vector>

#include "leakbound/harness/runner.h"
#include "leakbound/harness/trace.h"
#include "leakbound/reports/report.h"

namespace leakbound::harness {

struct SuiteOptions {
  RunOptions run;
  std::vector<std::string> workloads;  // names; empty = all that run on the device
  bool calibrate = true;               // derive noisy-counter floors from clean runs first
  int calibration_runs = 2;
  bool measure_probe_cost = true;      // probe sampling vs the medium MLP step
  bool progress = true;                // progress on stderr
  // Set (non-zero, e.g. to the signal number) by a signal handler to stop the run: the workload
  // in progress stops after its current step and is dropped; finished workloads are kept and the
  // report's meta.interrupted is set. Null: not interruptible.
  const std::atomic<int>* stop = nullptr;
};

// Throws std::invalid_argument on unknown workload names (listing the known ones) or options.
// When `traces` is given it receives what was recorded (one Trace per finished workload, the
// metadata and the noise floors), from which JudgeTraceFile reproduces the report's verdicts.
reports::Report RunSuite(const SuiteOptions& options, TraceFile* traces = nullptr);

// The workloads RunSuite would run, in order, after checking the options: every name known,
// none named twice, CUDA-only entries only on a CUDA device, and a schedule calibration can use.
// Throws std::invalid_argument saying what to change. Cheap: the CLI calls it before it writes.
std::vector<const workloads::Registration*> SelectWorkloads(const SuiteOptions& options);

// Metadata of this build and machine (commit, compiler, build type, device, host, time).
reports::RunMetadata CurrentMetadata(const RunOptions& options);

// Device class used as the baselines/ folder name: "cpu", or e.g. "h200" for an NVIDIA H200.
std::string DeviceClass(const runtime::Device& device);

// Console tables.
void PrintSummary(const reports::Report& report, std::ostream& out);
void PrintDetectionTable(const reports::Report& report, std::ostream& out);

// True when every workload met its expectation.
bool AllExpectationsMet(const reports::Report& report);

}  // namespace leakbound::harness
