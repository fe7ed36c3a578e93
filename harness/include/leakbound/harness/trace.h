// Trace: what a recording produced, before any judgement. The in-process Runner records one per
// workload; `leakbound watch` records one from a program it observes. Judge (judge.h) turns a
// Trace into a WorkloadResult as a pure function, so a verdict can be re-checked from the file
// (`leakbound judge TRACE`) and the GPU verdict paths can be tested from synthetic traces.
// File format: docs/trace-schema.md (JSON, "leakbound-trace", versioned).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "leakbound/harness/verdict.h"
#include "leakbound/reports/report.h"

namespace leakbound::harness {

// 2: census snapshots (survivors by birth). Schema-1 traces are still read; they have no census,
// so Judge decides growth on them by the block-range rule and says so.
inline constexpr int kTraceSchemaVersion = 2;
inline constexpr int kOldestTraceSchemaVersion = 1;

// A trace file that cannot be read: malformed JSON, a missing or mistyped field, a schema this
// build does not read, series of the wrong length. The message names the file, the field and
// what to do.
class TraceError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// One counter sampled after every step (warm-up included).
struct TraceCounter {
  std::string name;   // "runtime.live_bytes", "host.heap_bytes", "cupti.device_bytes", ...
  std::string unit;   // "bytes" or "count"
  bool exact = true;  // exact (allocator, interposer, ledger) or noisy (RSS, mallinfo2, driver)
  bool judged = true;  // false: informational (peaks, cumulative counts)
  std::string probe;   // the probe that produced it ("runtime", "host", "cupti", ...)
  // Non-empty when this counter is a high-water mark of another counter (e.g.
  // "runtime.peak_bytes" is the peak of "runtime.live_bytes"): Judge uses it as the observed
  // peak between samples.
  std::string peak_of;
  std::vector<double> values;  // values[i] = sample after step i
  double baseline = 0;         // before setup
  double final_value = 0;      // after teardown
  bool operator==(const TraceCounter&) const = default;
};

struct ProbeState {
  std::string name;   // "runtime", "host", "cupti", ...
  std::string state;  // "active", "unavailable: <reason>", "disabled"
  bool operator==(const ProbeState&) const = default;
  // A probe that is "partly unavailable" still measures what it can: only "unavailable" and
  // "disabled" take its counters out of judgement.
  bool active() const {
    return state.rfind("unavailable", 0) != 0 && state.rfind("disabled", 0) != 0;
  }
};

// What was outstanding at one block end, grouped by tag (runtime tracking) or by call site
// (the interposer, under `watch`). Steps are absolute step indices (0-based; -1: setup).
struct OutstandingRow {
  std::string op;     // op name or call site
  std::string role;   // value, grad, workspace, parameter, user, heap, ...
  std::string scope;  // step, forward, manual, none
  std::uint64_t bytes = 0;
  std::uint64_t allocations = 0;
  std::int64_t oldest_step = -1;  // step in which the oldest of these was made
  std::int64_t newest_step = -1;
  // The row's own census by birth at this snapshot (a watched call site's, channel.h
  // SITE_CENSUS): its survivors by the cohort they were born in, from the first cohort it books
  // (what it allocated before is unknown, not absent). Empty: no census for this row.
  std::vector<CensusCohort> census{};
  bool operator==(const OutstandingRow&) const = default;
};

struct OutstandingSnapshot {
  int step = 0;  // sample index of the block end
  std::vector<OutstandingRow> rows;
  bool operator==(const OutstandingSnapshot&) const = default;
};

// A census of survivors by birth (docs/verdicts.md, "Census"): at one sample, the bytes and blocks
// still live, grouped by the stretch of steps they were born in (CensusCohort, verdict.h).
struct CensusSnapshot {
  std::string counter;  // the exact counter it explains: "host.heap_bytes", "runtime.live_bytes"
  int step = 0;         // sample index it was taken at (a block end)
  std::vector<CensusCohort> cohorts;
  bool operator==(const CensusSnapshot&) const = default;
};

// The workload as the recorder knew it (for `watch`: a foreign program, kind "watched").
struct TraceSubject {
  std::string name;
  std::string description;
  std::string kind = "clean";  // "clean", "zoo", "trap", "watched"
  reports::VerdictClass expectation = reports::kPass;
  std::string detected_by;  // zoo: the counter that must show the planted class
  std::optional<double> peak_budget_bytes;
  int period_steps = 1;  // the workload's own period; blocks must be at least this long
  bool operator==(const TraceSubject&) const = default;
};

struct Trace {
  TraceSubject subject;
  // The schedule actually run: warm-up, then `blocks` measured blocks of `steps_per_block`
  // steps, the last `confirmation_blocks` of which were added to confirm a rise.
  int warmup_steps = 0;
  bool warmup_detected = false;  // true: detected (auto), false: configured
  int blocks = 0;
  int steps_per_block = 0;
  int confirmation_blocks = 0;
  // Samples after the last measured block: in the series and the report, not judged (a watched
  // program's steps after its last census point). Series hold TotalSteps() + tail_steps samples.
  int tail_steps = 0;
  std::vector<ProbeState> probes;
  std::vector<TraceCounter> counters;
  std::vector<double> step_ns;   // wall time of each step
  std::vector<double> probe_ns;  // sampling cost after each step
  std::vector<OutstandingSnapshot> outstanding;  // at measured block ends, in order
  // Censuses at block ends (per counter, in step order). Empty: no census was taken (a schema-1
  // trace, a heap without records); Judge then falls back to the block-range rule.
  std::vector<CensusSnapshot> census;
  // Trace schema this trace was read from (kTraceSchemaVersion when recorded by this build).
  int schema_version = kTraceSchemaVersion;
  // Workloads whose peak depends on thread interleaving: the sum of each session's own peak.
  std::optional<double> peak_bound_bytes;
  // Non-empty when the recording failed (the workload threw, a probe failed, the program
  // crashed): Judge then returns kError with this as evidence, and the series as recorded.
  std::string error;
  // Non-empty when the recording stopped early on purpose (interrupted, the program ended):
  // Judge then returns kInconclusive unless enough blocks arrived.
  std::string ended_early;

  bool operator==(const Trace&) const = default;
  const TraceCounter* Find(const std::string& counter_name) const;
  std::int64_t TotalSteps() const {
    return std::int64_t{warmup_steps} + std::int64_t{blocks} * steps_per_block;
  }
  std::int64_t SampleCount() const { return TotalSteps() + tail_steps; }
};

// A set of traces as one run wrote them: the run's metadata, the noise floors it judged noisy
// counters against (empty: not calibrated), and one trace per workload.
struct TraceFile {
  int schema_version = kTraceSchemaVersion;
  reports::RunMetadata meta;
  std::map<std::string, NoiseFloor> noise_floors;
  std::vector<Trace> traces;
  bool operator==(const TraceFile&) const = default;
};

// JSON (docs/trace-schema.md). Reading validates every field and every series length; throws
// TraceError naming the source, the JSON path and what to do.
std::string TraceFileToJson(const TraceFile& file);
TraceFile TraceFileFromJson(const std::string& text, const std::string& source = "trace");
TraceFile LoadTraceFile(const std::filesystem::path& path);
// Written to a temporary file and renamed into place: never half-written.
void WriteTraceFileAtomically(const TraceFile& file, const std::filesystem::path& path);

}  // namespace leakbound::harness
