// Runner: drives one workload through baseline sample, setup, warm-up (configured or detected),
// B blocks of N steps sampled after every step, teardown and a final sample; then judges every
// counter and combines the verdicts into the workload's result with attribution.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "leakbound/harness/probe.h"
#include "leakbound/harness/probes.h"
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

// Called after every step: workload name, steps done, steps planned (may grow while warm-up
// is being detected).
using ProgressFn = std::function<void(const std::string&, int, int)>;

class Runner {
 public:
  explicit Runner(RunOptions options);
  const RunOptions& options() const { return options_; }

  reports::WorkloadResult Run(const workloads::Registration& registration,
                              const ProgressFn& progress = {}) const;

  // Runs clean workloads `runs` times with the configured schedule and derives the noise floor of
  // every noisy judged counter from their measured windows.
  std::map<std::string, NoiseFloor> Calibrate(const std::vector<std::string>& clean_workloads,
                                              int runs) const;

 private:
  RunOptions options_;
};

// The overall verdict from counter verdicts (precedence: growth > fragmentation >
// not-returned > peak), and whether it met the workload's expectation.
void CombineVerdicts(const workloads::WorkloadInfo& info, reports::WorkloadResult& result);

// Renames a growth verdict on a pool's reserved bytes to kPoolFragmentation when the pool's
// used bytes are flat (cuda.pool_* from the runtime's pool, cupti.pool_* from the ledger).
void ClassifyPoolFragmentation(std::vector<reports::CounterVerdict>& verdicts);

}  // namespace leakbound::harness
