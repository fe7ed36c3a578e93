// The report data model: one versioned structure for everything a leakbound run produces.
// Harness fills it; JSON (de)serialisation, Markdown/HTML rendering and diffing read it.
// Schema documented in docs/report-schema.md; bump kSchemaVersion on any incompatible change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "leakbound/reports/verdict_class.h"

namespace leakbound::reports {

inline constexpr int kSchemaVersion = 1;

struct RunMetadata {
  std::string tool_version;  // e.g. "0.1.0"
  std::string commit;        // git describe / sha, "unknown" when not a checkout
  std::string compiler;      // e.g. "GNU 12.2.0"
  std::string build_type;    // Release, RelWithDebInfo, ...
  std::string device;        // human description: "cpu (CPU stub)", "cuda:0 NVIDIA H200"
  std::string device_class;  // baseline folder key: "cpu", "h200"
  std::string hostname;
  std::string started_at;    // ISO 8601 UTC
  double wall_seconds = 0;   // whole run
  int blocks = 0;            // configured measured blocks
  int steps_per_block = 0;
  int warmup_steps = -1;     // configured warm-up; -1 = auto-detected per workload
  // Settings that change the figures; absent in reports written before they were recorded.
  std::optional<std::uint64_t> seed;  // workload data seed
  std::optional<int> blas_threads;    // OpenBLAS threads of CPU sessions (0: OpenBLAS's own)
  std::optional<bool> calibrated;     // noise floors calibrated, so noisy counters were judged
  // The run was stopped by a signal (SIGINT, SIGTERM): only the workloads that finished are in
  // the report. Absent in JSON means false.
  bool interrupted = false;

  // Every struct compares field by field (NaN != NaN, as for doubles): round-trip tests, diff.
  bool operator==(const RunMetadata&) const = default;
};

// One counter sampled at every step of a workload run.
struct CounterSeries {
  std::string name;   // "runtime.live_bytes", "host.rss_bytes", ...
  std::string unit;   // "bytes" or "count"
  bool exact = true;  // exact (allocator, ledger) or noisy (RSS, driver)
  std::vector<double> values;  // values[i] = sample after step i (0-based, warm-up included)

  bool operator==(const CounterSeries&) const = default;
};

struct CounterVerdict {
  std::string counter;
  VerdictClass verdict = kPass;
  double slope_per_step = 0;    // bytes (or count) per step over the measured blocks
  double slope_bound = 0;       // noise floor the slope was judged against (0 for exact)
  double baseline = 0;          // before setup
  double final_value = 0;       // after teardown
  double peak = 0;              // max over the run
  std::string evidence;         // one human sentence
  // False for a counter that is reported but not judged (peaks, cumulative counts, RSS, a noisy
  // counter without a calibrated floor): its verdict is kPass by construction and renderers
  // show "not judged". Absent in JSON means true.
  bool judged = true;
  // The census of survivors (docs/verdicts.md, "Census"): bytes born in each measured block and
  // still live at the last block end. Empty: no census (a noisy counter, a schema-1 trace).
  std::vector<double> survivor_bytes{};

  bool operator==(const CounterVerdict&) const = default;
};

// What is still outstanding at the end of the measured blocks, grouped by tag (an op, a call site),
// with how it grew across the measured block ends.
struct Attribution {
  std::string op;     // op or call-site name
  std::string role;   // value, grad, workspace, parameter, optimizer-state, user, ...
  std::string scope;  // step, forward, manual, none
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
  std::int64_t oldest_age_steps = 0;
  std::int64_t newest_age_steps = 0;
  // Its live bytes' growth from the first measured block end to the last, per step, and at how
  // many of the `transitions` between consecutive block ends they rose. A row that rose at every
  // one kept survivors from every block: it grows. All 0: one block end, or a schema-1 report.
  double bytes_per_step = 0;
  int rose_at = 0;
  int transitions = 0;
  // The call stack of a watched program's call site, outermost first ("train_step
  // torch_mlp.py:34", ..., "libtorch_cpu.so.1.13+0x317394a"); empty when none is known.
  std::vector<std::string> stack{};
  // The row's own census by birth, where it has one (a watched call site that grew at three
  // markers): what the census rule makes of it ("growth", "recurring", "bounded", "one-time",
  // "settling", "thinning"; it decides whether the row grows, instead of rose_at), and its
  // survivors at the last block end by the measured block they were born in, from block
  // census_from_block (1-based: the blocks before it started are not counted). Empty: none.
  std::string census{};
  std::vector<double> survivor_bytes{};
  int census_from_block = 1;

  bool operator==(const Attribution&) const = default;
};

struct WorkloadResult {
  std::string name;
  std::string description;
  std::string kind;         // "clean", "zoo", "trap"
  VerdictClass expectation = kPass;  // kPass for clean/trap, the planted class for zoo entries
  VerdictClass verdict = kPass;      // kPass or the class found
  bool met_expectation = false;
  std::string evidence;     // the sentence that explains the verdict
  int warmup_steps = 0;     // effective (configured or detected)
  int blocks = 0;
  int steps_per_block = 0;
  std::vector<int> block_ends;  // sample index of the last step of each measured block
  // Summary figures used by diff and the summary table.
  double baseline_live_bytes = 0;
  double steady_live_bytes = 0;  // runtime live bytes at the last block end
  double final_live_bytes = 0;   // after teardown
  double peak_bytes = 0;
  // Only for workloads whose peak depends on how threads interleave (several sessions stepping
  // concurrently): a schedule-independent upper bound on peak_bytes, the sum of each session's
  // own high-water mark. diff judges such a workload's peak on this bound. Absent otherwise.
  std::optional<double> peak_bound_bytes;
  double allocations_per_step = 0;
  double step_time_ns = 0;       // median over measured steps
  double probe_time_ns = 0;      // median probe sampling cost per sample
  std::vector<CounterVerdict> counters;
  std::vector<CounterSeries> series;
  std::vector<Attribution> attribution;

  bool operator==(const WorkloadResult&) const = default;
};

struct BenchmarkFigure {
  std::string name;
  double value = 0;
  std::string unit;

  bool operator==(const BenchmarkFigure&) const = default;
};

struct Report {
  int schema_version = kSchemaVersion;
  RunMetadata meta;
  std::vector<WorkloadResult> workloads;
  std::vector<BenchmarkFigure> benchmarks;

  bool operator==(const Report&) const = default;
};

}  // namespace leakbound::reports
