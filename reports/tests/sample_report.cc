// Sample reports for tests and visual checks (see sample_report.h).

#include "sample_report.h"

#include <cmath>

namespace leakbound::reports::testing {
namespace {

// block_ends for a run of `warmup` steps then `blocks` x `steps_per_block`.
std::vector<int> BlockEnds(int warmup, int blocks, int steps_per_block) {
  std::vector<int> ends;
  for (int block = 1; block <= blocks; ++block) ends.push_back(warmup + block * steps_per_block - 1);
  return ends;
}

// Deterministic jitter in [-1, 1] (no <random>: the sample must be identical everywhere).
double Jitter(int step) { return std::sin(step * 12.9898) * 0.5 + std::sin(step * 78.233) * 0.5; }

void SetSchedule(WorkloadResult& workload, int warmup, int blocks, int steps_per_block) {
  workload.warmup_steps = warmup;
  workload.blocks = blocks;
  workload.steps_per_block = steps_per_block;
  workload.block_ends = BlockEnds(warmup, blocks, steps_per_block);
}

}  // namespace

WorkloadResult MakeCleanWorkload(const std::string& name) {
  WorkloadResult workload;
  workload.name = name;
  workload.description = "Two-layer MLP trained with SGD inside WithStep.";
  workload.kind = "clean";
  workload.expectation = kPass;
  workload.verdict = kPass;
  workload.met_expectation = true;
  workload.evidence =
      "runtime.live_bytes is identical at every block end (1.50 MiB) and returns to the baseline "
      "after teardown.";
  SetSchedule(workload, 10, 4, 50);
  workload.baseline_live_bytes = 0;
  workload.steady_live_bytes = 1.5 * kMiB;
  workload.final_live_bytes = 0;
  workload.peak_bytes = 2 * kMiB;
  workload.allocations_per_step = 12;
  workload.step_time_ns = 1.2e6;
  workload.probe_time_ns = 850;

  CounterSeries live{"runtime.live_bytes", "bytes", true, {}};
  CounterSeries rss{"host.rss_bytes", "bytes", false, {}};
  for (int step = 0; step < 210; ++step) {
    live.values.push_back(step < 10 ? 0.5 * kMiB + step * 0.1 * kMiB : 1.5 * kMiB);
    rss.values.push_back(48 * kMiB + (step < 10 ? step * 0.4 * kMiB : 4 * kMiB) +
                         Jitter(step) * 96 * kKiB);
  }
  workload.series = {live, rss};
  workload.counters = {
      CounterVerdict{"runtime.live_bytes", kPass, 0, 0, 0, 0, 2 * kMiB,
                     "Equal at all 4 block ends (1.50 MiB)."},
      CounterVerdict{"host.rss_bytes", kPass, 12.5, 4096, 48 * kMiB, 52 * kMiB, 52.5 * kMiB,
                     "Slope 12.5 B/step is under the 4.00 KiB/step noise floor."}};
  return workload;
}

WorkloadResult MakeDetectedZooWorkload(const std::string& name) {
  WorkloadResult workload;
  workload.name = name;
  workload.description = "Accumulates every step's loss tensor in a Python-style list.";
  workload.kind = "zoo";
  workload.expectation = kUnboundedGrowth;
  workload.verdict = kUnboundedGrowth;
  workload.met_expectation = true;
  workload.evidence =
      "runtime.live_bytes grows 64.00 KiB/step across 4 blocks (exact counter, bound 0); "
      "3.00 MiB outstanding from matmul values aged 1-48 steps.";
  SetSchedule(workload, 5, 4, 12);
  workload.baseline_live_bytes = 0;
  workload.steady_live_bytes = 0.5 * kMiB + 53 * 64 * kKiB;  // sample 52, the last block end
  workload.final_live_bytes = 48 * 64 * kKiB;
  workload.peak_bytes = workload.steady_live_bytes;
  workload.allocations_per_step = 9;
  workload.step_time_ns = 310e3;
  workload.probe_time_ns = 640;
  CounterSeries live{"runtime.live_bytes", "bytes", true, {}};
  CounterSeries outstanding{"tracking.outstanding", "count", true, {}};
  for (int step = 0; step < 53; ++step) {
    live.values.push_back(0.5 * kMiB + (step + 1) * 64 * kKiB);
    outstanding.values.push_back(20 + step);
  }
  workload.series = {live, outstanding};
  workload.counters = {
      CounterVerdict{"runtime.live_bytes", kUnboundedGrowth, 64 * kKiB, 0, 0, 48 * 64 * kKiB,
                     workload.peak_bytes, "Grows 64.00 KiB/step; exact counter, any growth counts."},
      CounterVerdict{"tracking.outstanding", kUnboundedGrowth, 1, 0, 0, 48, 72,
                     "One more outstanding allocation every step."}};
  workload.attribution = {
      // Rose at each of the 3 block ends after the first: a growing row.
      Attribution{"matmul", "value", "manual", 48 * 64 * 1024, 48, 48, 1, 65536, 3, 3},
      Attribution{"relu", "workspace", "step", 4096, 1, 0, 0}};
  return workload;
}

WorkloadResult MakeMissedZooWorkload(const std::string& name) {
  WorkloadResult workload = MakeCleanWorkload(name);
  workload.description = "Keeps a 256 KiB workspace cached after teardown.";
  workload.kind = "zoo";
  workload.expectation = kNotReturnedToBaseline;
  workload.verdict = kPass;
  workload.met_expectation = false;
  workload.evidence =
      "Expected not-returned-to-baseline, but runtime.live_bytes returned to 0 B after teardown: "
      "the cached workspace is not allocated through the runtime's resources.";
  workload.attribution = {Attribution{"conv2d", "workspace", "none", 256 * 1024, 1, 200, 200}};
  return workload;
}

WorkloadResult MakeTrapWorkload(const std::string& name) {
  WorkloadResult workload;
  workload.name = name;
  workload.description = "Reuses one parameter across steps; a naive checker calls it a leak.";
  workload.kind = "trap";
  workload.expectation = kPass;
  workload.verdict = kPass;
  workload.met_expectation = true;
  workload.evidence = "Parameter storage is constant (256.00 KiB) and owned by the Param.";
  SetSchedule(workload, 0, 2, 20);
  workload.baseline_live_bytes = 0;
  workload.steady_live_bytes = 256 * kKiB;
  workload.final_live_bytes = 0;
  workload.peak_bytes = 256 * kKiB;
  workload.allocations_per_step = 0;
  workload.step_time_ns = 42e3;
  workload.probe_time_ns = 600;
  workload.series = {CounterSeries{"runtime.live_bytes", "bytes", true,
                                   std::vector<double>(40, 256 * kKiB)},
                     CounterSeries{"cuda.pool_reserved_bytes", "bytes", true, {4 * kMiB}}};
  workload.counters = {CounterVerdict{"runtime.live_bytes", kPass, 0, 0, 0, 0, 256 * kKiB,
                                      "Constant at 256.00 KiB."}};
  return workload;
}

WorkloadResult MakeLongSpikyWorkload(const std::string& name) {
  WorkloadResult workload;
  workload.name = name;
  workload.description = "Long stress run of a transformer block with a transient workspace.";
  workload.kind = "clean";
  workload.expectation = kPass;
  workload.verdict = kPeakOverBudget;
  workload.met_expectation = false;
  workload.evidence =
      "Peak 40.00 MiB at step 3100 exceeds the 32.00 MiB budget; live bytes are otherwise flat.";
  SetSchedule(workload, 200, 8, 600);
  workload.baseline_live_bytes = 1 * kMiB;
  workload.steady_live_bytes = 24 * kMiB;
  workload.final_live_bytes = 1 * kMiB;
  workload.peak_bytes = 40 * kMiB;
  workload.allocations_per_step = 131.25;
  workload.step_time_ns = 2.5e6;
  workload.probe_time_ns = 1100;
  CounterSeries live{"runtime.live_bytes", "bytes", true, {}};
  CounterSeries rss{"host.rss_bytes", "bytes", false, {}};
  for (int step = 0; step < 5000; ++step) {
    const double warm = step < 200 ? step / 200.0 : 1.0;
    live.values.push_back(step == 3100 ? 40 * kMiB : 1 * kMiB + warm * 23 * kMiB);
    rss.values.push_back(300 * kMiB + warm * 30 * kMiB + Jitter(step) * 2 * kMiB);
  }
  workload.series = {live, rss};
  workload.counters = {
      CounterVerdict{"runtime.live_bytes", kPeakOverBudget, 0, 0, 1 * kMiB, 1 * kMiB, 40 * kMiB,
                     "Peak 40.00 MiB at step 3100 exceeds the 32.00 MiB budget."},
      CounterVerdict{"host.rss_bytes", kPass, 3.5, 2048, 300 * kMiB, 331 * kMiB, 332 * kMiB,
                     "Slope 3.5 B/step is under the 2.00 KiB/step noise floor."}};
  workload.attribution = {
      Attribution{"attention.softmax", "workspace", "forward", 16 * 1024 * 1024, 2, 1, 1}};
  return workload;
}

RunMetadata MakeCpuMetadata() {
  RunMetadata meta;
  meta.tool_version = "0.1.0";
  meta.commit = "4598ec4";
  meta.compiler = "GNU 12.2.0";
  meta.build_type = "Release";
  meta.device = "cpu (CPU stub)";
  meta.device_class = "cpu";
  meta.hostname = "ci-runner-3";
  meta.started_at = "2025-01-15T03:12:44Z";
  meta.wall_seconds = 12.75;
  meta.blocks = 4;
  meta.steps_per_block = 50;
  meta.warmup_steps = -1;
  return meta;
}

Report MakeSampleReport() {
  Report report;
  report.meta = MakeCpuMetadata();
  report.workloads = {MakeCleanWorkload("mlp_sgd"),
                      MakeDetectedZooWorkload("zoo_loss_history"),
                      MakeMissedZooWorkload("zoo_cached_workspace"),
                      MakeTrapWorkload("trap_param_reuse"),
                      MakeLongSpikyWorkload("stress_transformer_block")};
  report.benchmarks = {BenchmarkFigure{"probe_overhead_ns", 850, "ns"},
                       BenchmarkFigure{"steps_per_second", 833.3, "steps/s"}};
  return report;
}

}  // namespace leakbound::reports::testing
