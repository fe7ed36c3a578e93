// Runner: drives one workload through baseline sample, setup, warm-up (configured or detected),
// B blocks of N steps sampled after every step (plus confirmation blocks), teardown and a final
// sample. Record() produces a Trace; Run() judges it (judge.h).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "leakbound/harness/probe.h"
#include "leakbound/harness/probes.h"
#include "leakbound/harness/judge.h"
#include "leakbound/harness/trace.h"
#include "leakbound/harness/verdict.h"
#include "leakbound/reports/report.h"
#include "leakbound/workloads/workload.h"

namespace leakbound::harness {

struct RunOptions {
  runtime::Device device = runtime::Device::Cpu();
  int blocks = 3;
  int steps_per_block = 16;
  int warmup_steps = -1;  // -1: detect (first block boundary after which exact counters settle)
  int max_warmup_blocks = 4;
  // Blocks run after the planned ones when an exact counter rose at exactly one block
  // transition: growth only if it rises again (docs/verdicts.md). -1: as many as `blocks`, so
  // a leak that fires once every B*N steps still recurs; 0: none (a single rise is one-time).
  int confirm_blocks = -1;
  // Run one setup, step and teardown before the baseline, so that what the process initialises
  // once for its lifetime (locale state, BLAS buffers, glibc caches) is not counted as the
  // workload's residue (docs/verdicts.md). A leak per cycle or per step still shows.
  bool prime = true;
  // Polled before every step; non-zero (a signal number) stops the recording, which then ends
  // early with the reason.
  const std::atomic<int>* stop = nullptr;
  int blas_threads = 1;
  std::uint64_t seed = 1;
  // Noise floors of noisy counters, by counter name (from Calibrate()). A noisy counter with no
  // floor is reported but not judged.
  std::map<std::string, NoiseFloor> noise_floors;
  // Extra probes (e.g. CUDA driver, CUPTI) appended after the default ones.
  std::function<std::vector<std::unique_ptr<Probe>>()> extra_probes;
};

// Validates options; throws std::invalid_argument naming the bad value.
void ValidateRunOptions(const RunOptions& options);
// Throws std::invalid_argument when the block is shorter than the workload's declared period,
// saying which --steps to pass instead.
void ValidateScheduleFor(const RunOptions& options, const workloads::WorkloadInfo& info);

// Called after every step: workload name, steps done, steps planned (may grow while warm-up
// is being detected).
using ProgressFn = std::function<void(const std::string&, int, int)>;

class Runner {
 public:
  explicit Runner(RunOptions options);
  const RunOptions& options() const { return options_; }

  // Records one workload: never throws for what the workload or a probe does (the trace then
  // carries the error); throws std::invalid_argument when the schedule does not suit it.
  Trace Record(const workloads::Registration& registration, const ProgressFn& progress = {}) const;
  // Record, then Judge with the options' noise floors.
  reports::WorkloadResult Run(const workloads::Registration& registration,
                              const ProgressFn& progress = {}) const;

  // Runs clean workloads `runs` times with the configured schedule and derives the noise floor of
  // every noisy judged counter from their measured windows.
  std::map<std::string, NoiseFloor> Calibrate(const std::vector<std::string>& clean_workloads,
                                              int runs) const;

 private:
  // Record() without the last-resort catch around the workload's factory and the probes' set-up.
  Trace RecordOrThrow(const workloads::Registration& registration, const ProgressFn& progress) const;
  RunOptions options_;
};

}  // namespace leakbound::harness
